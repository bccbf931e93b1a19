// The AdaRound benchmark workloads (docs/ada.md, Speed), shared by benchmarks/ada.cpp (end to end)
// and benchmarks/gemm.cpp (the layer arithmetic alone): a Linear 512->512, a Conv2d 64->64 3x3
// (padding 1) over 16x16 inputs, a depthwise Conv2d 128 channels 3x3 (padding 1) over 32x32 and a
// ConvTranspose2d 64->32 4x4 (stride 2, padding 1) from 16x16 to 32x32, with normal random data.
// benchmarks/ada_torch.py builds the same layers in PyTorch.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

#include "ptq/algorithms/layer/layer_geometry.hpp"

namespace ptq_bench {

inline ptq::layer_geometry linear_512() {
  ptq::layer_geometry g;
  g.type = ptq::layer_type::linear;
  g.in_channels = 512;
  g.out_channels = 512;
  return g;
}

inline ptq::layer_geometry conv_64_3x3_16() {
  ptq::layer_geometry g;
  g.type = ptq::layer_type::conv2d;
  g.in_channels = 64;
  g.out_channels = 64;
  g.kernel_h = g.kernel_w = 3;
  g.pad_h = g.pad_w = 1;
  g.in_h = g.in_w = 16;
  return g;
}

inline ptq::layer_geometry depthwise_128_3x3_32() {
  ptq::layer_geometry g = conv_64_3x3_16();
  g.in_channels = g.out_channels = g.groups = 128;
  g.in_h = g.in_w = 32;
  return g;
}

inline ptq::layer_geometry conv_transpose_64_32_4x4_s2_16() {
  ptq::layer_geometry g;
  g.type = ptq::layer_type::conv_transpose2d;
  g.in_channels = 64;
  g.out_channels = 32;
  g.kernel_h = g.kernel_w = 4;
  g.stride_h = g.stride_w = 2;
  g.pad_h = g.pad_w = 1;
  g.in_h = g.in_w = 16;
  return g;
}

/// n floats from N(0, sd²), from a fixed seed.
inline std::vector<float> normal_floats(std::size_t n, unsigned seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v)
    x = nd(rng);
  return v;
}

}  // namespace ptq_bench
