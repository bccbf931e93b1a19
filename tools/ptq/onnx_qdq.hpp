// The ONNX QDQ exporter of `ptq export --format onnx-qdq` (spec exporters.md §4): reads a float
// ONNX model, inserts QuantizeLinear/DequantizeLinear from a calibration record, writes the
// model atomically. Tool side only: onnx_qdq.cpp is the one file that includes ONNX's headers
// (Debian's libonnx-dev and its protobuf), so the header-only library never needs them. A ptq
// built without ONNX (PTQ_WITH_ONNX=OFF) still has these functions; they return E1250.
#pragma once

#include <string>
#include <vector>

#include "ptq/core/error.hpp"
#include "ptq/export/qdq_table.hpp"

namespace ptq_cli {

/// Whether this ptq was built with ONNX (PTQ_WITH_ONNX).
[[nodiscard]] bool onnx_available() noexcept;

/// The inputs of one onnx-qdq export (the paths as the user gave them).
struct onnx_qdq_request {
  std::string onnx_path;      ///< --onnx: the float model
  std::string record_path;    ///< --record: the calibration record (ptq calibrate --record)
  std::string manifest_path;  ///< --model: the manifest the record was calibrated with
  /// --config: the quant config of the calibration. Needed only when a quantized layer has a
  /// BatchNorm: the config decides whether calibration folded it (do_fusion,
  /// skip_fusion_layers), and the exported weights must be the ones the scales were taken on.
  std::string config_path;
  std::string output_path;         ///< -o
  bool uint8_activations = false;  ///< activation zero points as uint8 (o_d + 128), not int8
};

/// What was inserted for one layer, for the tool's summary.
struct onnx_qdq_layer_summary {
  std::string layer;       ///< the record's layer name
  std::string node;        ///< the ONNX node it was matched to
  std::string activation;  ///< the activation tensor that now goes through Q/DQ
  std::string
      weight;  ///< the weight initializer replaced by int8 + DequantizeLinear ("" for AvgPool)
  int weight_axis = -1;  ///< DequantizeLinear axis of the weight (-1: per tensor)
  bool fused = false;    ///< the BatchNorm after the Conv was folded into it
  bool dmq = false;      ///< a Div by the DMQ factors was inserted before the Q
};

/// Reads the record, manifest and model, inserts the Q/DQ nodes and writes `output_path`
/// atomically (nothing is written on error). Errors name the file and the layer: E1250 (built
/// without ONNX), E1251 (not an ONNX model), E1252 (a layer with no node), E1253 (a layer the
/// exporter cannot express in QDQ), E1254 (--config missing for a layer with a BatchNorm), and
/// the file, record, manifest and config codes of their readers.
[[nodiscard]] ptq::result<std::vector<onnx_qdq_layer_summary>> export_onnx_qdq(
    const onnx_qdq_request& request);

/// `ptq export --format onnx-qdq`: runs export_onnx_qdq, prints one line per layer on stdout
/// (unless `quiet`) and any error on stderr as "ptq export: error: ... [E125x]". Returns the
/// tool's exit code (0, or 1 for invalid input).
[[nodiscard]] int run_onnx_qdq(const onnx_qdq_request& request, bool quiet);

/// The ONNX names of one manifest layer, for formats that key by them when --onnx is given.
struct onnx_layer_names {
  std::string layer;       ///< the manifest's layer name
  std::string node;        ///< the ONNX node (e.g. "/conv1/Conv")
  std::string activation;  ///< the tensor the node reads as its input (the activation entry)
  std::string weight;      ///< the node's weight initializer ("" for AvgPool)
};

/// Matches every quantizable manifest layer to its ONNX node (by the manifest's `weight`
/// field, AvgPool2d by node name) and returns their names in manifest order. Same errors as
/// export_onnx_qdq for the model and the matching.
[[nodiscard]] ptq::result<std::vector<onnx_layer_names>> onnx_names(
    const std::string& onnx_path, const std::string& manifest_path);

/// Renames the table's entries to the ONNX model's names (onnx_names): each layer's activation
/// tensor becomes its node's input 0, its weight tensor the node's weight initializer, so that
/// `ptq export --onnx` keys every format as the engine reading that model expects.
[[nodiscard]] ptq::result<> apply_onnx_names(ptq::qdq_table& table, const std::string& onnx_path,
                                             const std::string& manifest_path);

}  // namespace ptq_cli
