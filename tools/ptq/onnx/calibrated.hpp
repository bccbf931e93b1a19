// The calibrated graph (docs/deploy.md): the float ONNX model with the graph changes the
// calibration made, applied as it made them, which every engine export starts from.
//   - A BatchNorm that calibration folded into its conv is folded here, into the weight and
//     bias the scales were taken on; one it kept apart stays (or, for the QDQ model's fused
//     placement, is folded after quantization, into the dequantization scales and the bias).
//   - A DMQ layer's weight is balanced (times b along Cin). Its input is divided by b: folded
//     into the producing layer's output channels where the path from it is positively
//     homogeneous (Conv/Linear, BatchNorm, ReLU, pooling, Flatten), else a Div before the
//     layer (W1255 says why).
//   - A quantized layer's weight is its fake-quantized weight (the codes times scale_w), so an
//     engine that quantizes it again with the exported scales gets ptq's codes, AdaRound's
//     learned rounding included.
// It also gives, per quantized layer, what the QDQ model needs: the weight codes, the
// per-channel factors the folds put after them, the deployed bias and the tensor quantized.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "../onnx_export.hpp"
#include "graph.hpp"
#include "match.hpp"
#include "ptq/export/qdq_table.hpp"

namespace ptq_cli::onnx_tool {

struct calibrated_options {
  dmq_mode dmq = dmq_mode::fold;
  /// Fold a BatchNorm that calibration kept apart into the quantized conv before it, after
  /// quantization: its scale joins the dequantization scales, its shift the bias (the QDQ
  /// model's fused placement, so the conv can run as one int8 kernel).
  bool fold_kept_batch_norms = false;
};

/// One quantized layer of the calibrated graph.
struct deployed_layer {
  const ptq::manifest_layer* manifest = nullptr;
  const ptq::qdq_layer* table = nullptr;  ///< its row of the QDQ table
  std::string node;                       ///< the node's label in the calibrated graph
  std::string output;                     ///< the node's output 0 in the calibrated graph
  std::string input;                      ///< the tensor the layer quantizes (its input 0)
  std::string weight;                     ///< the node's weight input ("" for AvgPool2d)
  /// Weight codes in the manifest's layout, each channel's sign folded (channel_scale >= 0).
  std::vector<std::int8_t> codes;
  std::vector<std::size_t> weight_shape;  ///< manifest layout
  /// Per output channel: what multiplies scale_w after the folds (a kept BatchNorm's scale, a
  /// consumer's 1/b); empty when there is none.
  std::vector<float> channel_scale;
  std::vector<float> bias;  ///< the deployed bias (empty: none)
  bool fused_batch_norm = false;
  bool folded_kept_batch_norm = false;
  bool dmq_divided = false;     ///< a Div by the factors before the layer
  std::string dmq_folded_into;  ///< the node the 1/b went into ("" when none)
};

struct calibrated_model {
  model_file model;                    ///< the calibrated float graph
  std::vector<deployed_layer> layers;  ///< the table's layers, in its order
  std::vector<ptq::error> warnings;    ///< W1255 per Div kept
};

/// Builds the calibrated graph of `model` for `table` (every layer matched to its node) and
/// the calibration's `layers`. Errors: the matching's (E1252/E1253), a BatchNorm that is not
/// where calibration folded it (E1253), a layer missing from `layers` (E1253).
[[nodiscard]] ptq::result<calibrated_model> make_calibrated_model(
    model_file model, const ptq::model_manifest& manifest, const ptq::qdq_table& table,
    const calibration_layers& layers, const calibrated_options& options);

/// The output-channel index of each weight element (manifest layout) and the count.
struct weight_channels {
  std::vector<std::size_t> channel;
  std::size_t cout = 0;
};
[[nodiscard]] weight_channels channels_of(const ptq::manifest_layer& m);

}  // namespace ptq_cli::onnx_tool
