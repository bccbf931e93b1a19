// The QDQ model (docs/deploy.md): QuantizeLinear/DequantizeLinear in the calibrated graph.
// Every quantized layer gets its weight as int8 codes and a DequantizeLinear (scale_w times
// the folds' channel factors, per axis), and its input quantize-dequantized with scale_d and
// its zero point. Two placements:
//   - inputs: only there (the exact form of docs/export.md); with the exact DMQ Div and the
//     BatchNorms as calibrated, every Q/DQ output equals ptq's quantizer and fake-quant kernel
//     bit for bit.
//   - fused: also on the outputs that let an engine run each layer as one int8 kernel (ONNX
//     Runtime's QLinearConv, QGemm, QLinearMatMul, QLinearAveragePool, QLinearAdd, ...): a
//     layer's output is quantized with the scale of the layer that consumes it, through the
//     ops between them (ReLU, pooling, Flatten, Reshape, a residual Add, a DMQ Div).
#pragma once

#include <string>
#include <vector>

#include "calibrated.hpp"

namespace ptq_cli::onnx_tool {

/// What was done for one layer, for the tool's summary.
struct qdq_layer_summary {
  std::string layer;       ///< the record's layer name
  std::string node;        ///< its node in the exported model
  std::string activation;  ///< the tensor quantized for its input
  std::string weight;      ///< the weight input replaced by codes + DequantizeLinear ("": none)
  int weight_axis = -1;    ///< -1: per tensor
  bool unsigned_weight = false;  ///< uint8 codes with zero point 128
  bool fused_batch_norm = false;
  bool folded_kept_batch_norm = false;
  std::string dmq;     ///< "", "Div", or "folded into <node>"
  std::string output;  ///< how its output leaves it: "int8 (...)", "float", "float (W1256)"
};

/// How the Q/DQ nodes are written.
struct qdq_form {
  qdq_placement placement = qdq_placement::fused;
  /// 8-bit weights as uint8 codes with zero point 128 (the same grid): ONNX Runtime's x86
  /// uint8 x int8 kernel without VNNI adds pairs of products into saturating int16, which
  /// full-range 8-bit weights overflow; its uint8 x uint8 kernel does not. Weights of 7 bits
  /// or fewer stay int8 (a pair of products stays under 2^15).
  bool unsigned_8bit_weights = false;
};

/// Inserts the Q/DQ nodes into `model`'s graph. Warnings (W1256: a layer an int8 kernel cannot
/// take) are appended to `warnings`. Errors: E1253 (what QDQ cannot express: bits, a grouped
/// ConvTranspose with per-channel scales).
[[nodiscard]] ptq::result<std::vector<qdq_layer_summary>> insert_qdq(
    calibrated_model& model, const qdq_form& form, std::vector<ptq::error>& warnings);

}  // namespace ptq_cli::onnx_tool
