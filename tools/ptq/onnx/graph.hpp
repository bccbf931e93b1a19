// The ONNX graph helpers of the tool's ONNX exporters (docs/deploy.md): reading a model file,
// the graph's producers, consumers and constants (initializers, also through the Identity nodes
// torch shares equal initializers with), and the edits every exporter makes: unique names, new
// initializers and nodes, removed nodes, then one clean-up (topological order, initializers and
// value_info left unused). Only the tool's onnx/ sources include it: they are the files built
// with Debian's libonnx-dev and its protobuf, so the header-only library never needs them.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ptq/core/error.hpp"

namespace ptq_cli::onnx_tool {

/// The first opset with per-axis QuantizeLinear/DequantizeLinear.
inline constexpr std::int64_t min_opset = 13;

/// A model read from a file, with the opset of its default domain.
struct model_file {
  onnx::ModelProto model;
  std::int64_t opset = 0;
  std::string path;  ///< as the user gave it (--onnx)
};

/// Reads an ONNX model of up to 2 GiB (protobuf's limit). Errors: the file's (E10xx, named
/// --onnx), not an ONNX model (E1251), an opset below 13 or external data (E1253).
[[nodiscard]] ptq::result<model_file> load_model(const std::string& path);

/// ONNX's checker and strict shape inference, as python3-onnx's check_model(full_check=True).
[[nodiscard]] ptq::result<> check_model(const onnx::ModelProto& m);

/// The dims of every tensor ONNX's shape inference types (graph inputs, outputs, value_info),
/// -1 for a dimension it leaves symbolic. Empty when inference fails.
using tensor_shapes = std::map<std::string, std::vector<std::int64_t>>;
[[nodiscard]] tensor_shapes infer_tensor_shapes(const onnx::ModelProto& m);

/// A float32 tensor in C order (what try_parse_manifest reads a weight as).
struct tensor_values {
  std::vector<std::size_t> shape;
  std::vector<float> data;
};

/// The float32 values of an initializer, C order. Errors name the initializer and `path`.
[[nodiscard]] ptq::result<tensor_values> float_values(const onnx::TensorProto& t,
                                                      const std::string& path);

[[nodiscard]] const onnx::AttributeProto* find_attribute(const onnx::NodeProto& n,
                                                         std::string_view name);
[[nodiscard]] std::int64_t int_attribute(const onnx::NodeProto& n, std::string_view name,
                                         std::int64_t fallback);
/// The node's name, or "<op> #<index>" for a node without one.
[[nodiscard]] std::string node_label(const onnx::NodeProto& n, int index);

/// Conv, ConvTranspose, Gemm, MatMul: the nodes a weighted layer can be.
[[nodiscard]] bool is_weighted_op(const std::string& op);
/// Whether the weight of node `n` is its input 1 in the K×N layout (Gemm transB=0, MatMul).
[[nodiscard]] bool weight_is_k_by_n(const onnx::NodeProto& n);

/// One input of one node.
struct tensor_use {
  int node = -1;
  int input = -1;
};

/// Who produces and who reads each tensor of a graph. A view of the graph as it is when made:
/// make another after the graph's nodes change.
class graph_view {
 public:
  explicit graph_view(const onnx::GraphProto& g);

  [[nodiscard]] const onnx::GraphProto& graph() const noexcept { return *g_; }
  [[nodiscard]] const onnx::NodeProto& node(int i) const { return g_->node(i); }
  /// The node inputs that read `tensor` (empty names, optional inputs left out, are not uses).
  [[nodiscard]] const std::vector<tensor_use>& consumers(const std::string& tensor) const;
  /// The node that writes `tensor`, -1 for a graph input, an initializer or an unknown name.
  [[nodiscard]] int producer(const std::string& tensor) const;
  [[nodiscard]] const onnx::TensorProto* initializer(const std::string& tensor) const;
  /// The initializer `tensor` holds: the initializer of that name, or the one at the start of
  /// the chain of Identity nodes producing it. nullptr when it is not a constant.
  [[nodiscard]] const onnx::TensorProto* constant(const std::string& tensor) const;
  [[nodiscard]] bool is_graph_output(const std::string& tensor) const;
  /// A graph input that is not an initializer (IR < 4 lists initializers as inputs too).
  [[nodiscard]] bool is_graph_input(const std::string& tensor) const;

 private:
  const onnx::GraphProto* g_;
  std::map<std::string, std::vector<tensor_use>> consumers_;
  std::map<std::string, int> producers_;
  std::map<std::string, const onnx::TensorProto*> initializers_;
  std::set<std::string> outputs_;
  std::set<std::string> inputs_;
};

/// The edits of one pass over a graph. New nodes are appended and removed nodes only marked;
/// finish() puts every node after its inputs' producers (keeping the graph's order where it
/// can), drops the removed nodes, the initializers and graph inputs that `release` named and no
/// node reads any more, and the value_info of tensors no node writes.
class graph_edit {
 public:
  explicit graph_edit(onnx::GraphProto& g);

  [[nodiscard]] onnx::GraphProto& graph() noexcept { return *g_; }
  /// A tensor or node name no other tensor, node or initializer of the graph has: `base`, else
  /// `base_1`, `base_2`, ...
  [[nodiscard]] std::string unique(const std::string& base);
  /// A new initializer named unique(base); returns its name.
  std::string add_initializer(const std::string& base, int type,
                              const std::vector<std::int64_t>& dims, const void* data,
                              std::size_t bytes);
  std::string add_floats(const std::string& base, const std::vector<std::int64_t>& dims,
                         const std::vector<float>& values);
  /// A new node named unique(base) reading `inputs` and writing `outputs`.
  onnx::NodeProto& add_node(const std::string& op, const std::string& base,
                            const std::vector<std::string>& inputs,
                            const std::vector<std::string>& outputs);
  /// Sets input `k` of node `node` to float32 `values` of shape `dims`: written into the
  /// initializer it reads when no other input reads that initializer (its name stays, which is
  /// what the tables key by), else into a new initializer named after the input.
  void set_float_input(int node, int k, const std::vector<std::int64_t>& dims,
                       const std::vector<float>& values);
  void remove_node(int index) { removed_.insert(index); }
  /// A tensor that may be unused after the edits: dropped in finish() when it is an
  /// initializer (or a graph input) that nothing reads any more.
  void release(const std::string& tensor) { released_.insert(tensor); }
  /// A tensor no node will write any more: its value_info is dropped.
  void vanish(const std::string& tensor) { vanished_.insert(tensor); }
  /// Applies the edits. The graph_edit must not be used afterwards.
  void finish();

 private:
  void drop_dead_identities();

  onnx::GraphProto* g_;
  std::set<std::string> used_;
  std::set<int> removed_;
  std::set<std::string> released_;
  std::set<std::string> vanished_;
};

}  // namespace ptq_cli::onnx_tool
