// What an activation observer returns, and the FORCE_FP16_QUANT step on it.
// Depends on: core.
#pragma once

#include <cstdint>

#include "ptq/core/abi.hpp"
#include "ptq/core/fp16.hpp"
#include "ptq/core/quant.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// scale_d / offset_d of one activation, its bit width, and the float range it covers.
struct activation_quant_result {
  float scale = 1.0f;
  std::int32_t offset = 0;
  int bits = 8;
  float clip_min = 0.0f;
  float clip_max = 0.0f;
};

[[nodiscard]] inline activation_quant_result make_activation_result(const quant_params& p) {
  const clip_range c = clip_range_of(p);
  return activation_quant_result{p.scale, p.offset, p.bits, c.clip_min, c.clip_max};
}

/// FORCE_FP16_QUANT (docs/numerics.md): scale_d rounded through binary16; the offset is kept, the
/// clip range follows the new scale.
[[nodiscard]] inline activation_quant_result with_fp16_scale(const activation_quant_result& r) {
  return make_activation_result(quant_params{fp16_scale(r.scale), r.offset, r.bits});
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
