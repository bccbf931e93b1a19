// The symmetric int8 form of an AMCT activation (docs/export.md), shared by the TensorRT cache
// and the ncnn table, and the loss messages of the formats that cannot hold a layer's DMQ factors
// or FORCE_FP16 state. Standard library only.
// Depends on: the standard library.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "ptq/export/export_options.hpp"
#include "ptq/export/qdq_table.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// An activation on the symmetric int8 grid `[-128, 127] * step`, `amax = 127 * step` the clip.
struct symmetric_int8 {
  float step = 0.0f;
  float amax = 0.0f;   ///< max(|clip_lo|, |clip_hi|) of AMCT's grid
  bool exact = false;  ///< 8 bits and offset_d == 0: step is scale_d, the same grid as AMCT
};

/// `step = scale_d` when the AMCT grid is already symmetric 8-bit, else `amax / 127` with
/// `amax = scale_d * max(2^(n-1) + offset_d, 2^(n-1) - 1 - offset_d)`: the clip range kept,
/// the grid coarser (asymmetric) or finer (fewer bits). float32 arithmetic throughout.
[[nodiscard]] inline symmetric_int8 to_symmetric_int8(const qdq_activation& a) noexcept {
  const std::int32_t half = std::int32_t{1} << (a.bits - 1);
  const std::int32_t k = std::max(half + a.offset_d, half - 1 - a.offset_d);
  symmetric_int8 s;
  s.amax = a.scale * static_cast<float>(k);
  s.exact = a.bits == 8 && a.offset_d == 0;
  s.step = s.exact ? a.scale : s.amax / 127.0f;
  return s;
}

namespace detail {

/// Two decimals, for a number of bits.
[[nodiscard]] inline std::string fixed2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

/// Reports what the symmetric form `s` of layer `l`'s activation loses (nothing when exact).
inline void report_symmetric_loss(export_report& rep, const qdq_layer& l, const symmetric_int8& s) {
  if (s.exact)
    return;
  const auto& a = l.activation;
  const double ratio = static_cast<double>(s.step) / static_cast<double>(a.scale);
  if (a.offset_d != 0) {
    rep.lossy(l.name, "asymmetric activation (offset_d " + std::to_string(a.offset_d) +
                          ") on the symmetric int8 grid: step " + short_number(s.step) + " is " +
                          short_number(ratio) + "x scale_d " + short_number(a.scale) + " (" +
                          fixed2(std::log2(ratio)) + " bits lost)");
  } else {
    rep.lossy(l.name, std::to_string(a.bits) + "-bit activation on the int8 grid: step " +
                          short_number(s.step) + " is " + short_number(ratio) + "x scale_d " +
                          short_number(a.scale) + " (same clip range " + short_number(s.amax) +
                          ", a different grid)");
  }
}

/// Reports the DMQ factors and FORCE_FP16 state of `l` a format cannot hold.
inline void report_unheld_state(export_report& rep, const qdq_layer& l) {
  if (!l.dmq_factors.empty()) {
    const auto mm = std::minmax_element(l.dmq_factors.begin(), l.dmq_factors.end());
    rep.lossy(l.name, std::to_string(l.dmq_factors.size()) + " DMQ factors in [" +
                          short_number(*mm.first) + ", " + short_number(*mm.second) +
                          "] are not in the file; the graph needs Mul(x, 1/b) before the layer "
                          "and the weight times b along Cin (docs/export.md)");
  }
  if (l.force_fp16) {
    rep.lossy(l.name,
              "FORCE_FP16_QUANT is not in the file (the deploy dequant scale keeps 10 mantissa "
              "bits, up to 2^-10 relative)");
  }
}

}  // namespace detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
