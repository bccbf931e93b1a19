// Layer kinds, tensor shapes and the per-channel geometry of weights (docs/numerics.md, ARQ
// and DMQ): the output channel axis for ARQ (with the ConvTranspose rearrangement with groups,
// computed without a copy) and the input channel axis for DMQ. No xtensor: the rearranged copy
// the tests compare with is tests/support/rearrange.hpp.
// Depends on: core and kernels.
#pragma once

#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ptq/core/error.hpp"
#include "ptq/core/layer_type.hpp"
#include "ptq/core/tensor_view.hpp"
#include "ptq/kernels/minmax.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// The weight rank of a layer kind (0 when the layer has no weight).
[[nodiscard]] constexpr std::size_t weight_rank(layer_type op) noexcept {
  switch (op) {
    case layer_type::conv1d:
    case layer_type::conv_transpose1d:
      return 3;
    case layer_type::conv2d:
    case layer_type::conv_transpose2d:
      return 4;
    case layer_type::conv3d:
      return 5;
    case layer_type::linear:
      return 2;
    case layer_type::avg_pool2d:
      return 0;
  }
  return 0;
}

[[nodiscard]] inline std::string shape_string(const std::vector<std::size_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i != 0u)
      out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

/// Error for the first NaN/Inf `v` of a range, naming the tensor and the flat index.
[[nodiscard]] inline error non_finite_error(std::string_view name, float v, std::size_t index) {
  const char* what = v != v ? "NaN" : (v > 0 ? "+Inf" : "-Inf");
  return make_error(errc::non_finite,
                    std::string(name) + ": " + what + " at flat index " + std::to_string(index));
}

/// Checks a tensor is not empty and finite; returns its min/max. `minmax` is a kernel_set's
/// minmax or anything called the same way (kernels::threaded_minmax).
template <class MinMax>
[[nodiscard]] result<kernels::minmax_result> checked_minmax(std::string_view name, const float* x,
                                                            std::size_t n, MinMax&& minmax) {
  if (n == 0) {
    return make_error(errc::empty_tensor, std::string(name) + ": empty tensor");
  }
  const kernels::minmax_result r = minmax(x, n);
  if (r.first_bad != n)
    return non_finite_error(name, x[r.first_bad], r.first_bad);
  return r;
}

/// How a weight splits into output channels (ARQ, docs/numerics.md): channel o is the union of
/// `segments_per_channel` contiguous runs of `segment` elements. For Conv/Linear a channel is one
/// row; for ConvTranspose [Cin, Cout/g, k...] channel o = gi·(Cout/g) + j collects the runs
/// W[gi·(Cin/g) + ci, j, :] for ci in [0, Cin/g).
struct channel_geometry {
  std::size_t channels = 0;  ///< Cout
  std::size_t segment = 0;   ///< contiguous run length
  std::size_t segments_per_channel = 1;
  bool transposed = false;
  std::size_t groups = 1;
  std::size_t cin = 0;  ///< ConvTranspose: shape[0]
  std::size_t cout_per_group = 0;

  /// Flat offset of run r (0 <= r < segments_per_channel) of channel o.
  [[nodiscard]] std::size_t offset(std::size_t o, std::size_t r) const noexcept {
    if (!transposed)
      return o * segment;
    const std::size_t cin_g = cin / groups;
    const std::size_t gi = o / cout_per_group;
    const std::size_t j = o % cout_per_group;
    return ((gi * cin_g + r) * cout_per_group + j) * segment;
  }
};

/// The output-channel geometry of a weight of layer kind `op` with `groups`.
[[nodiscard]] inline result<channel_geometry> output_channels(const std::vector<std::size_t>& shape,
                                                              layer_type op, std::size_t groups,
                                                              std::string_view name = "weight") {
  const std::size_t rank = weight_rank(op);
  if (rank == 0) {
    return make_error(
        errc::invalid_argument,
        std::string(name) + ": " + std::string(to_string(op)) + " has no weight to quantize");
  }
  if (shape.size() != rank) {
    return make_error(errc::shape_mismatch, std::string(name) + ": a " +
                                                std::string(to_string(op)) + " weight has rank " +
                                                std::to_string(rank) + ", got shape " +
                                                shape_string(shape));
  }
  if (groups == 0 || (op == layer_type::linear && groups != 1)) {
    return make_error(errc::invalid_argument,
                      std::string(name) + ": invalid groups " + std::to_string(groups));
  }
  std::size_t n = 1;
  for (auto d : shape)
    n *= d;
  if (n == 0) {
    return make_error(errc::empty_tensor,
                      std::string(name) + ": empty tensor (shape " + shape_string(shape) + ")");
  }
  channel_geometry g;
  g.groups = groups;
  if (!is_conv_transpose(op)) {
    if (shape[0] % groups != 0) {
      return make_error(errc::shape_mismatch,
                        std::string(name) + ": Cout " + std::to_string(shape[0]) +
                            " is not divisible by groups " + std::to_string(groups));
    }
    g.channels = shape[0];
    g.segment = n / shape[0];
    return g;
  }
  if (shape[0] % groups != 0) {
    return make_error(errc::shape_mismatch,
                      std::string(name) + ": Cin " + std::to_string(shape[0]) +
                          " is not divisible by groups " + std::to_string(groups));
  }
  g.transposed = true;
  g.cin = shape[0];
  g.cout_per_group = shape[1];
  g.channels = shape[1] * groups;
  g.segment = n / (shape[0] * shape[1]);
  g.segments_per_channel = shape[0] / groups;
  return g;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
