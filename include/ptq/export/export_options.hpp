// What every exporter takes besides the QDQ table, and how it reports a lossy conversion: a
// per-layer W1220 warning naming the format and the size of the loss, or, with `strict`, the
// same message as an error so that nothing is written.
// Depends on: core.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "ptq/core/error.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Options of the exporters (the ones a format does not use are ignored).
struct export_options {
  bool strict = false;  ///< a lossy conversion is an error (E1220) instead of a warning (W1220)
  /// TensorRT cache header `TRT-<trt_version>-<trt_calibrator>`: the version as TensorRT
  /// prints it (8601 for 8.6.1, 100300 for 10.3.0; required), the calibrator's algorithm.
  std::string trt_version;
  std::string trt_calibrator = "EntropyCalibration2";
};

namespace detail {

/// `%g` of a value (6 significant digits), for the sizes in loss messages.
[[nodiscard]] inline std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// Collects an exporter's diagnostics: lossy conversions as warnings (errors when strict).
class export_report {
 public:
  export_report(const export_options& opt, std::string format)
      : strict_(opt.strict), format_(std::move(format)) {}

  void lossy(const std::string& layer, const std::string& what) {
    diags_.emplace_back(errc::export_lossy, strict_ ? severity::error : severity::warning,
                        "layer '" + layer + "': " + format_ + ": " + what);
  }
  void fail(errc code, const std::string& layer, const std::string& what) {
    diags_.push_back(make_error(code, "layer '" + layer + "': " + format_ + ": " + what));
  }
  [[nodiscard]] bool failed() const noexcept {
    for (const auto& d : diags_) {
      if (is_error(d))
        return true;
    }
    return false;
  }
  /// The file, or the errors (with the warnings found before them).
  [[nodiscard]] result<std::string> finish(std::string text) {
    if (failed())
      return result<std::string>(std::move(diags_));
    return {std::move(text), std::move(diags_)};
  }
  [[nodiscard]] const std::string& format() const noexcept { return format_; }

 private:
  bool strict_;
  std::string format_;
  std::vector<error> diags_;
};

}  // namespace detail

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
