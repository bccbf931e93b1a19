// The export formats by name (`ptq export --format`, `ptq calibrate --export FORMAT=OUT`): one
// row per format, so a new format is one row (the ONNX QDQ model, which needs the ONNX model
// file, is added by the tool). Adds nlohmann_json (through the JSON formats).
// Depends on: the standard library.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ptq/export/aimet.hpp"
#include "ptq/export/amct_deploy.hpp"
#include "ptq/export/export_options.hpp"
#include "ptq/export/ncnn_table.hpp"
#include "ptq/export/qdq_json.hpp"
#include "ptq/export/qdq_table.hpp"
#include "ptq/export/trt_cache.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// One format: its name, what it is, whether it needs the manifest, and its writer.
struct export_format {
  std::string_view name;
  std::string_view summary;
  bool needs_model = false;
  result<std::string> (*write)(const qdq_table&, const export_options&) = nullptr;
};

namespace detail {
[[nodiscard]] inline result<std::string> write_qdq_json_format(const qdq_table& t,
                                                               const export_options&) {
  return write_qdq_json(t);
}
}  // namespace detail

/// The library's formats, in the order `ptq export --help` lists them.
[[nodiscard]] inline const std::vector<export_format>& export_formats() {
  static const std::vector<export_format> formats = {
      {"trt-cache", "TensorRT calibration cache (implicit INT8, TensorRT <= 10)", false,
       &write_trt_cache},
      {"ncnn-table", "ncnn int8 scale table for ncnn2int8", true, &write_ncnn_table},
      {"aimet-0.6.1", "AIMET encodings 0.6.1 (QNN/SNPE quantization overrides)", false,
       &write_aimet_0_6_1},
      {"aimet-1.0.0", "AIMET encodings 1.0.0", false, &write_aimet_1_0_0},
      {"amct-deploy", "AMCT deploy numbers (AscendQuant/AscendDequant, int32 bias) as JSON", false,
       &write_amct_deploy},
      {"qdq-json", "the format-agnostic QDQ table as JSON", false, &detail::write_qdq_json_format},
  };
  return formats;
}

/// The format called `name`, or nullptr.
[[nodiscard]] inline const export_format* find_export_format(std::string_view name) noexcept {
  for (const auto& f : export_formats()) {
    if (f.name == name)
      return &f;
  }
  return nullptr;
}

/// The format names joined by ", ", for messages.
[[nodiscard]] inline std::string export_format_names() {
  std::string out;
  for (const auto& f : export_formats())
    out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
