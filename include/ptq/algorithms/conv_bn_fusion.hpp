// Conv+BatchNorm fusion (spec §5.1), in the float32 order PyTorch's fuse_conv_bn_weights uses:
//   r_c = 1 / sqrt(var_c + eps),  W'_c = W_c * (gamma_c * r_c),  b'_c = (b_c - mean_c) * r_c *
//   gamma_c + beta_c
// Standard library only.
#pragma once

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "ptq/core/error.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// An eval-mode BatchNorm that follows a convolution (PyTorch names).
struct batch_norm_params {
  std::vector<float> weight;  ///< gamma
  std::vector<float> bias;    ///< beta
  std::vector<float> running_mean;
  std::vector<float> running_var;
  float eps = 1e-5f;
};

/// A conv's weight ([Cout, ...], C order) and bias after fusion.
struct fused_conv {
  std::vector<float> weight;
  std::vector<float> bias;
};

/// Fuses `bn` into a conv weight of `cout` output channels (`weight.size()` a multiple of cout;
/// an empty `bias` means no bias). Errors: lengths that do not match. The result may hold inf or
/// NaN (a zero variance with eps 0, say); `is_finite(fused_conv)` tells, and the toolkit then
/// skips the fusion.
[[nodiscard]] inline result<fused_conv> fuse_conv_bn(const std::vector<float>& weight,
                                                     const std::vector<float>& bias,
                                                     std::size_t cout, const batch_norm_params& bn,
                                                     const std::string& name = "conv") {
  if (cout == 0 || weight.empty() || weight.size() % cout != 0) {
    return make_error(errc::shape_mismatch, name + ": weight of " + std::to_string(weight.size()) +
                                                " values does not split into " +
                                                std::to_string(cout) + " output channels");
  }
  if (bn.weight.size() != cout || bn.bias.size() != cout || bn.running_mean.size() != cout ||
      bn.running_var.size() != cout || (!bias.empty() && bias.size() != cout)) {
    return make_error(errc::shape_mismatch, name + ": BatchNorm parameters and bias need " +
                                                std::to_string(cout) +
                                                " values each (one per output channel)");
  }
  const std::size_t per = weight.size() / cout;
  fused_conv out;
  out.weight.resize(weight.size());
  out.bias.resize(cout);
  for (std::size_t c = 0; c < cout; ++c) {
    const float r = 1.0f / std::sqrt(bn.running_var[c] + bn.eps);
    const float k = bn.weight[c] * r;
    for (std::size_t i = 0; i < per; ++i)
      out.weight[c * per + i] = weight[c * per + i] * k;
    const float b = bias.empty() ? 0.0f : bias[c];
    out.bias[c] = (b - bn.running_mean[c]) * r * bn.weight[c] + bn.bias[c];
  }
  return out;
}

/// True when every fused value is finite (otherwise the toolkit keeps the conv and BN apart).
[[nodiscard]] inline bool is_finite(const fused_conv& f) noexcept {
  for (const float v : f.weight) {
    if (!std::isfinite(v))
      return false;
  }
  for (const float v : f.bias) {
    if (!std::isfinite(v))
      return false;
  }
  return true;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
