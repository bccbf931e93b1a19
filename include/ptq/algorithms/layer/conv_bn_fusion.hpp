// Conv+BatchNorm fusion (docs/calibrate.md, phase 1), in the float32 order PyTorch's
// fuse_conv_bn_weights uses:
//   r_c = 1 / sqrt(var_c + eps),  W'_c = W_c * (gamma_c * r_c),  b'_c = (b_c - mean_c) * r_c *
//   gamma_c + beta_c
// Depends on: core.
#pragma once

#include <cfloat>
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

/// The per-channel arithmetic of the fusion: W'_c = W_c * scale[c], b'_c = bias[c].
struct conv_bn_factors {
  std::vector<float> scale;
  std::vector<float> bias;
};

/// The fusion's factors for a conv weight of `weight_size` values in `cout` output channels (an
/// empty `bias` means no bias). Errors: lengths that do not match.
[[nodiscard]] inline result<conv_bn_factors> conv_bn_fusion_factors(std::size_t weight_size,
                                                                    const std::vector<float>& bias,
                                                                    std::size_t cout,
                                                                    const batch_norm_params& bn,
                                                                    const std::string& name) {
  if (cout == 0 || weight_size == 0 || weight_size % cout != 0) {
    return make_error(errc::shape_mismatch, name + ": weight of " + std::to_string(weight_size) +
                                                " values does not split into " +
                                                std::to_string(cout) + " output channels");
  }
  if (bn.weight.size() != cout || bn.bias.size() != cout || bn.running_mean.size() != cout ||
      bn.running_var.size() != cout || (!bias.empty() && bias.size() != cout)) {
    return make_error(errc::shape_mismatch, name + ": BatchNorm parameters and bias need " +
                                                std::to_string(cout) +
                                                " values each (one per output channel)");
  }
  conv_bn_factors f;
  f.scale.resize(cout);
  f.bias.resize(cout);
  for (std::size_t c = 0; c < cout; ++c) {
    const float r = 1.0f / std::sqrt(bn.running_var[c] + bn.eps);
    f.scale[c] = bn.weight[c] * r;
    const float b = bias.empty() ? 0.0f : bias[c];
    f.bias[c] = (b - bn.running_mean[c]) * r * bn.weight[c] + bn.bias[c];
  }
  return f;
}

/// out[i] = weight[i] * f.scale[channel of i] over a weight of n values ([Cout, ...]); `out` may
/// be `weight` (fusion in place).
inline void apply_conv_bn_factors(const float* weight, std::size_t n, const conv_bn_factors& f,
                                  float* out) noexcept {
  const std::size_t per = n / f.scale.size();
  for (std::size_t c = 0; c < f.scale.size(); ++c) {
    for (std::size_t i = 0; i < per; ++i)
      out[c * per + i] = weight[c * per + i] * f.scale[c];
  }
}

/// Fuses `bn` into a conv weight of `cout` output channels (`weight.size()` a multiple of cout;
/// an empty `bias` means no bias). Errors: lengths that do not match. The result may hold inf or
/// NaN (a zero variance with eps 0, say); `is_finite(fused_conv)` tells, and the toolkit then
/// skips the fusion.
[[nodiscard]] inline result<fused_conv> fuse_conv_bn(const std::vector<float>& weight,
                                                     const std::vector<float>& bias,
                                                     std::size_t cout, const batch_norm_params& bn,
                                                     const std::string& name = "conv") {
  auto f = conv_bn_fusion_factors(weight.size(), bias, cout, bn, name);
  if (!f)
    return f.error();
  fused_conv out;
  out.weight.resize(weight.size());
  apply_conv_bn_factors(weight.data(), weight.size(), f.value(), out.weight.data());
  out.bias = std::move(f.value().bias);
  return out;
}

/// Whether fusing with `f` keeps every value of `weight[0, n)` finite (a read-only pass with
/// the fusion's own products), so a caller can fuse in place only when the toolkit would.
[[nodiscard]] inline bool fusion_stays_finite(const float* weight, std::size_t n,
                                              const conv_bn_factors& f) noexcept {
  const std::size_t cout = f.scale.size();
  const std::size_t per = n / cout;
  bool bad = false;  // no early exit: the loop stays branch-free
  for (std::size_t c = 0; c < cout; ++c) {
    const float k = f.scale[c];
    bad |= !(std::fabs(f.bias[c]) <= FLT_MAX);
    for (std::size_t i = 0; i < per; ++i)
      bad |= !(std::fabs(weight[c * per + i] * k) <= FLT_MAX);
  }
  return !bad;
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
