// Which ONNX node each manifest layer is (docs/export.md, "Matching"): a weighted layer is the
// one Conv, ConvTranspose, Gemm or MatMul that reads the layer's weight as its input 1, directly
// or through the Identity nodes torch shares equal initializers with; an AvgPool2d layer, which
// has no weight, is the AveragePool named like the layer or in its torch scope `/<layer>/`.
// The manifest's weights are read from the model's initializers, so the record is checked
// against the weights the model holds.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "graph.hpp"
#include "ptq/session/model_manifest.hpp"

namespace ptq_cli::onnx_tool {

/// The model's initializers as the tensor source try_parse_manifest reads the layers' weights
/// from. A Gemm weight with transB=0 (and a MatMul weight) is K×N; it is shown transposed, in
/// PyTorch's Linear layout N×K, which is what the manifest and the record describe.
struct model_weights {
  const graph_view* view = nullptr;
  std::string path;
  std::set<std::string> transposed;  ///< tensor names read as the K×N weight of a node

  explicit model_weights(const graph_view& v, std::string model_path);
  [[nodiscard]] ptq::result<tensor_values> get(std::string_view name) const;
};

/// Reads the manifest at `manifest_path` with the model's initializers as its tensors. A layer
/// whose `weight` is not a constant of the model is E1252 (the usual cause: an exporter renamed
/// it, e.g. torch's constant folding gives "onnx::Conv_29"), listing the weights it has.
[[nodiscard]] ptq::result<ptq::model_manifest> read_manifest(const std::string& manifest_path,
                                                             const model_weights& weights);

/// The node of every manifest layer named in `layers` (all of them when empty), in manifest
/// order. Errors: E1252 (no such node, listing the candidates), E1253 (a weight several nodes
/// read, or a node of the wrong kind).
struct matched_layer {
  const ptq::manifest_layer* manifest = nullptr;
  int node = -1;
};
[[nodiscard]] ptq::result<std::vector<matched_layer>> match_layers(
    const graph_view& view, const ptq::model_manifest& manifest, const std::string& model_path,
    const std::vector<std::string>& layers);

}  // namespace ptq_cli::onnx_tool
