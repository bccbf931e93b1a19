// The ONNX exports of a ptq built without ONNX (PTQ_WITH_ONNX=OFF, or libonnx-dev not found):
// every call says so with E1250, and what to install. Built instead of the other files here.
#include "../onnx_export.hpp"

namespace ptq_cli {

namespace {

[[nodiscard]] ptq::error unavailable() {
  return ptq::make_error(ptq::errc::onnx_unavailable,
                         "this ptq was built without ONNX (PTQ_WITH_ONNX=OFF), so it cannot "
                         "read or write ONNX models",
                         "install libonnx-dev and rebuild (cmake -DPTQ_WITH_ONNX=ON)");
}

}  // namespace

bool onnx_available() noexcept {
  return false;
}

ptq::result<onnx_export_result> export_onnx_model(const onnx_sources&, const std::string&,
                                                  const onnx_export_options&, const named_path&,
                                                  const std::string&) {
  return unavailable();
}

ptq::result<std::vector<onnx_layer_names>> key_table_to_onnx(ptq::qdq_table&, const onnx_sources&,
                                                             const onnx_export_options&) {
  return unavailable();
}

}  // namespace ptq_cli
