// The TensorRT calibration cache (implicit INT8 quantization, TensorRT <= 10.x; docs/export.md):
// `TRT-<version>-<calibrator>`, then one `<tensor>: <hex>` line per quantized layer input,
// the hex being the float32 bit pattern of the symmetric step (`amax / 127`, or scale_d when
// exact). Weights are not in the file: TensorRT derives them from the model. Standard library.
// Depends on: the standard library.
#pragma once

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "ptq/export/export_options.hpp"
#include "ptq/export/qdq_table.hpp"
#include "ptq/export/symmetric.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

namespace detail {

/// `%08x` of the float32 bit pattern, as TensorRT reads it (strtoul base 16).
[[nodiscard]] inline std::string float_hex(float v) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(bits));
  return buf;
}

[[nodiscard]] inline bool all_of_class(const std::string& s, int (*pred)(int)) {
  if (s.empty())
    return false;
  for (const char c : s) {
    if (pred(static_cast<unsigned char>(c)) == 0)
      return false;
  }
  return true;
}

}  // namespace detail

/// The cache text. Errors: a version that is not a decimal number or a calibrator that is not
/// a word (E1208), a tensor name with a line break or ": " (E1204), a step that is not a
/// finite positive float32 (E1204). Lossy (W1220, E1220 when strict): asymmetric or non-8-bit
/// activations, INT16 activations (the layer is left out), DMQ factors, FORCE_FP16.
[[nodiscard]] inline result<std::string> write_trt_cache(const qdq_table& t,
                                                         const export_options& opt = {}) {
  if (!detail::all_of_class(opt.trt_version, [](int c) { return std::isdigit(c); })) {
    return make_error(
        errc::export_option_invalid,
        "trt-cache needs the TensorRT version as the decimal number TensorRT prints in the cache "
        "header (8601 for 8.6.1, 100300 for 10.3.0), got '" +
            opt.trt_version + "'");
  }
  if (!detail::all_of_class(opt.trt_calibrator, [](int c) { return std::isalnum(c); })) {
    return make_error(errc::export_option_invalid,
                      "the TensorRT calibrator '" + opt.trt_calibrator +
                          "' must be a word such as EntropyCalibration2 or MinMaxCalibration");
  }
  detail::export_report rep(opt, "trt-cache");
  std::string out = "TRT-" + opt.trt_version + "-" + opt.trt_calibrator + "\n";
  for (const auto& l : t.layers) {
    const auto& name = l.activation.tensor;
    if (name.find_first_of("\r\n") != std::string::npos || name.find(": ") != std::string::npos) {
      rep.fail(errc::export_not_representable, l.name,
               "the tensor name contains a line break or \": \", which the cache cannot hold");
      continue;
    }
    if (l.activation.bits > 8) {
      rep.lossy(l.name,
                "INT16 activation has no TensorRT int8 form; the layer is left out (it "
                "runs unquantized)");
      continue;
    }
    const auto s = to_symmetric_int8(l.activation);
    if (!std::isfinite(s.step) || !(s.step > 0.0f)) {
      rep.fail(errc::export_not_representable, l.name,
               "the step " + detail::short_number(s.step) + " is not a finite positive float32");
      continue;
    }
    detail::report_symmetric_loss(rep, l, s);
    detail::report_unheld_state(rep, l);
    out += name + ": " + detail::float_hex(s.step) + "\n";
  }
  return rep.finish(std::move(out));
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
