// The ONNX exports of the `ptq` tool (docs/deploy.md, docs/export.md), without ONNX's
// headers: the commands include this; the files of tools/ptq/onnx/ implement it with Debian's
// libonnx-dev and its protobuf, and onnx/unavailable.cpp (a ptq built with PTQ_WITH_ONNX=OFF)
// answers every call with E1250. The header-only library never needs ONNX.
//   - onnx-qdq: the model with QuantizeLinear/DequantizeLinear for an int8 engine;
//   - onnx: the calibrated float graph (the calibration's BatchNorm folds and DMQ scaling);
//   - onnx_table_names: the names an engine reading the calibrated graph keys its tables by.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "outputs.hpp"
#include "ptq/core/error.hpp"
#include "ptq/export/qdq_table.hpp"
#include "ptq/session/model_manifest.hpp"
#include "ptq/session/record.hpp"

namespace ptq_cli {

/// Whether this ptq was built with ONNX (PTQ_WITH_ONNX).
[[nodiscard]] bool onnx_available() noexcept;

/// Where the QDQ model quantizes: `fused` also quantizes the outputs an int8 engine needs to
/// run each layer as one kernel; `inputs` only the layers' inputs and weights (exactly ptq's
/// codes with dmq_mode::exact).
enum class qdq_placement { fused, inputs };
/// A DMQ layer's division: folded into the producer where the graph allows it, or always the
/// exact Div before the layer.
enum class dmq_mode { fold, exact };
/// The QDQ dialect: ONNX Runtime (uint8 activations and 8-bit weights, fused placement) or
/// TensorRT (int8 with zero points 0, the layers' inputs, asymmetric grids made symmetric with
/// W1220).
enum class qdq_engine { onnxruntime, tensorrt };

struct onnx_export_options {
  qdq_engine engine = qdq_engine::onnxruntime;
  qdq_placement placement = qdq_placement::fused;
  bool unsigned_activations = true;
  bool unsigned_8bit_weights = true;  ///< uint8 codes, zero point 128 (onnx/qdq.hpp says why)
  dmq_mode dmq = dmq_mode::fold;
  bool strict = false;  ///< a lossy conversion (W1220) is an error
};

/// How calibration ran one manifest layer, as the ONNX exports need it.
struct calibrated_layer {
  bool fused = false;  ///< its BatchNorm was folded into weight and bias
  /// The weight its scales were taken on: fused when fused, times the DMQ factors along Cin;
  /// the fake-quantized weight itself when the calibration's own weights are at hand.
  std::vector<float> weight;
  std::vector<float> bias;  ///< the (fused) bias; empty: none
};

/// Every manifest layer calibration touched (quantized, or with a folded BatchNorm), by name.
using calibration_layers = std::map<std::string, calibrated_layer>;

/// What an ONNX export reads.
struct onnx_sources {
  std::string onnx_path;      ///< --onnx: the float model
  std::string manifest_path;  ///< --model: names the initializers that find each layer's node
  std::string record_path;    ///< for messages
  const ptq::record_file* record = nullptr;
  /// ptq export: the calibration's config, which decides the BatchNorm folds (the same session
  /// code as ptq calibrate). Needed when a quantized layer has a BatchNorm (E1254 without).
  std::string config_path;
  /// ptq calibrate: the run's layers (their fake-quantized weights carry AdaRound's rounding),
  /// and its manifest, whose weights the model's initializers must equal.
  const calibration_layers* calibration = nullptr;
  const ptq::model_manifest* run_manifest = nullptr;
};

/// One ONNX model written by an export, with the lines the tool prints about it.
struct onnx_export_result {
  output_file file;
  std::vector<std::string> summary;
};

/// `format` is "onnx-qdq" or "onnx". Warnings (W1220, W1255, W1256) are printed on stderr
/// behind `prefix`. Errors: E1250 (built without ONNX), E1251-E1254, and the readers' codes.
[[nodiscard]] ptq::result<onnx_export_result> export_onnx_model(const onnx_sources& sources,
                                                                const std::string& format,
                                                                const onnx_export_options& options,
                                                                const named_path& target,
                                                                const std::string& prefix);

/// Keys `table` to the calibrated graph of `sources` (the one `--format onnx` writes): each
/// layer's activation entry is the tensor its node reads (a DMQ Div's output where the Div
/// stays), its weight entry the node's weight input, and `node` the node's name (ncnn's layer
/// name after onnx2ncnn); DMQ factors the graph holds are taken out of the table, and a layer
/// whose output channels took a fold gets its weight scales times those factors.
struct onnx_layer_names {
  std::string layer;       ///< the manifest's layer name
  std::string node;        ///< the node's name in the calibrated graph
  std::string activation;  ///< the tensor the node reads as its input
  std::string weight;      ///< the node's weight input ("" for AvgPool2d)
};
[[nodiscard]] ptq::result<std::vector<onnx_layer_names>> key_table_to_onnx(
    ptq::qdq_table& table, const onnx_sources& sources, const onnx_export_options& options);

}  // namespace ptq_cli
