// The AdaRound benchmark workloads (docs/ada.md, Speed), shared by benchmarks/ada.cpp (end to end)
// and benchmarks/gemm.cpp (the layer arithmetic alone): a Linear 512->512 and a Conv2d 64->64 3x3
// (padding 1) over 16x16 inputs, with normal random data.
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
