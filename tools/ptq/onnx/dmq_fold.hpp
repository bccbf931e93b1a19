// Where a DMQ layer's division by its factors can go (docs/deploy.md, "DMQ"). The layer's
// input x is divided by b per input channel. When the path from the node that produces x is
// positively homogeneous per channel (ReLU, LeakyReLU, max or average pooling, Flatten, Identity)
// and nothing else reads the tensors on it, x / b is the producer's output channel c divided
// by b[c]: a weighted node (its weight and bias), or a BatchNormalization (its scale and shift).
// A Flatten gives the layer C·k inputs for C producer channels; the fold then needs the k
// factors of each channel to be equal.
#pragma once

#include <string>
#include <vector>

#include "graph.hpp"

namespace ptq_cli::onnx_tool {

struct dmq_fold {
  int target = -1;             ///< the producing node, -1 when the factors cannot be folded
  std::vector<float> factors;  ///< b per output channel of `target`
  std::string reason;          ///< why not, when target is -1
};

/// The fold of factors `b` of the layer whose node is `layer_node`.
[[nodiscard]] dmq_fold find_dmq_fold(const graph_view& view, int layer_node,
                                     const std::vector<float>& b);

/// The output channels of a weighted node from its weight's ONNX dims (Conv M×C/g×k…,
/// ConvTranspose C×M/g×k… with `group`, Gemm and MatMul by transB), 0 when unknown.
[[nodiscard]] std::size_t node_output_channels(const onnx::NodeProto& n,
                                               const onnx::TensorProto& weight);

}  // namespace ptq_cli::onnx_tool
