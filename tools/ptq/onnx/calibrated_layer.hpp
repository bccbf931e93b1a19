// A layer of the calibrated graph while make_calibrated_model builds it (calibrated.hpp): its
// float weight and bias, the weight codes, the per-channel factors that the folds put after the
// codes, and the arithmetic on them. No graph edit here: calibrated.cpp does those.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "calibrated.hpp"
#include "ptq/core/error.hpp"
#include "ptq/export/qdq_table.hpp"
#include "ptq/session/model_manifest.hpp"

namespace ptq_cli::onnx_tool {

/// A layer's state while the graph is built.
struct layer_work {
  const ptq::manifest_layer* manifest = nullptr;
  const ptq::qdq_layer* table = nullptr;  ///< null: not quantized (a fused BatchNorm only)
  const calibrated_layer* calibration = nullptr;
  int node = -1;
  int batch_norm = -1;           ///< the BatchNormalization after the node, when there is one
  bool fold_batch_norm = false;  ///< calibrated fusion or the kept one folded after quantization
  std::vector<float> weight;     ///< float weight of the calibrated graph (manifest layout)
  std::vector<std::int8_t> codes;
  std::vector<float> channel_scale;
  std::vector<float> bias;
  std::vector<float> divide;  ///< factors of a Div before the layer
  std::string folded_into;
};

/// Whether the layer has a quantized weight (a table row with a weight).
[[nodiscard]] inline bool has_codes(const layer_work& w) noexcept {
  return w.table != nullptr && w.table->weight.has_value();
}

/// Codes of the layer's weight with its scales, ties to even, as ptq's quantizer gives them.
void quantize_codes(layer_work& w);

/// Folds the kept BatchNorm after quantization: its scale a_c joins the channel scale (the
/// codes of a channel with a_c < 0 negated, so the scales stay positive), its shift the bias.
/// Returns false (nothing changed) when a negative channel holds the code -128.
[[nodiscard]] ptq::result<bool> fold_after_quantization(layer_work& w);

/// Divides output channel c of a layer's deployed weight and bias by b[c].
void divide_channels(layer_work& w, const std::vector<float>& b);

/// A quantized layer's deployed float weight: the codes times scale_w, times the channel
/// factors of the folds.
void dequantize_codes(layer_work& w);

/// The weight in the model's own layout (`dims` its shape): a K×N weight (Gemm transB=0,
/// MatMul) transposed back from the manifest's N×K.
[[nodiscard]] std::vector<float> to_model_layout(const std::vector<float>& v,
                                                 const std::vector<std::size_t>& shape,
                                                 const onnx::NodeProto& node,
                                                 std::vector<std::int64_t>& dims);

}  // namespace ptq_cli::onnx_tool
