// The ConvTranspose rearrangement (docs/numerics.md, ARQ) as an xtensor copy, for tests that check
// the library's copy-free channel geometry (channel_geometry in ptq/algorithms/layer/tensor.hpp)
// against it. Test-only: the library itself needs no xtensor for it.
#pragma once

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xmanipulation.hpp>

#include <cstddef>
#include <vector>

#include "ptq/algorithms/layer/tensor.hpp"

namespace ptq_test {

/// The ConvTranspose rearrangement as a copy: [Cin, Cout/g, k...] -> [Cout, Cin/g, k...]
/// (g = 1: swap axes 0 and 1; g > 1: reshape to [g, Cin/g, Cout/g, k...], swap the middle axes,
/// reshape). Row o of the result is output channel o.
[[nodiscard]] inline xt::xarray<float> rearrange_conv_transpose(const ptq::tensor_view& w,
                                                                std::size_t groups) {
  const auto& s = w.shape;
  std::vector<std::size_t> split{groups, s[0] / groups, s[1]};
  std::size_t k = 1;
  for (std::size_t i = 2; i < s.size(); ++i)
    k *= s[i];
  split.push_back(k);
  auto in = xt::adapt(w.in_place(), w.size(), xt::no_ownership(), split);
  xt::xarray<float> swapped = xt::transpose(in, {0, 2, 1, 3});
  std::vector<std::size_t> out_shape{groups * s[1], s[0] / groups};
  for (std::size_t i = 2; i < s.size(); ++i)
    out_shape.push_back(s[i]);
  swapped.reshape(out_shape);
  return swapped;
}

}  // namespace ptq_test
