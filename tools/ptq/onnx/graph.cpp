// The ONNX graph helpers of graph.hpp: loading and checking a model, shapes, values,
// attributes and the read-only graph_view (graph_edit is in graph_edit.cpp).
#include "graph.hpp"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <cstring>
#include <exception>
#include <utility>

#include "../input_files.hpp"
#include "ptq/io/read_file.hpp"

namespace ptq_cli::onnx_tool {

using ptq::errc;
using ptq::make_error;

namespace {

/// protobuf cannot parse a message of 2 GiB or more; larger models keep their weights as
/// external data, which these exporters do not read.
constexpr std::uint64_t max_onnx_bytes = (std::uint64_t{2} << 30) - 1;

}  // namespace

ptq::result<model_file> load_model(const std::string& path) {
  auto bytes = ptq::try_read_file(path, max_onnx_bytes);
  if (!bytes)
    return for_input(bytes.error(), "--onnx");
  model_file m;
  m.path = path;
  const std::string at = "--onnx '" + path + "': ";
  if (!m.model.ParseFromString(bytes.value())) {
    return make_error(errc::onnx_model_invalid,
                      at + "not an ONNX model (it does not parse as an ONNX ModelProto; a "
                           "truncated or foreign file)");
  }
  if (m.model.ir_version() <= 0 || !m.model.has_graph() || m.model.graph().node_size() == 0) {
    return make_error(errc::onnx_model_invalid,
                      at + "not an ONNX model (no ir_version or an empty graph)");
  }
  for (const auto& o : m.model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx")
      m.opset = o.version();
  }
  if (m.opset < min_opset) {
    return make_error(errc::onnx_unsupported,
                      at + "the model imports opset " + std::to_string(m.opset) +
                          " of the default domain; per-axis QuantizeLinear/DequantizeLinear "
                          "need opset 13 or newer",
                      "export the float model with opset_version=13 or newer");
  }
  for (const auto& t : m.model.graph().initializer()) {
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      return make_error(errc::onnx_unsupported,
                        at + "initializer '" + t.name() +
                            "' keeps its data in an external file, which this exporter "
                            "does not read");
    }
  }
  return m;
}

ptq::result<> check_model(const onnx::ModelProto& m) {
  try {
    onnx::checker::check_model(m);
    onnx::ModelProto copy = m;
    onnx::ShapeInferenceOptions opts(true, 1, false);
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(), opts);
  } catch (const std::exception& e) {
    return make_error(errc::onnx_unsupported,
                      std::string("the exported model fails ONNX's checker: ") + e.what());
  }
  return {};
}

tensor_shapes infer_tensor_shapes(const onnx::ModelProto& m) {
  tensor_shapes out;
  onnx::ModelProto copy = m;
  try {
    onnx::shape_inference::InferShapes(copy);
  } catch (const std::exception&) {
    return out;
  }
  const auto add = [&](const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape())
      return;
    auto& dims = out[v.name()];
    for (const auto& d : v.type().tensor_type().shape().dim())
      dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  };
  for (const auto& v : copy.graph().input())
    add(v);
  for (const auto& v : copy.graph().value_info())
    add(v);
  for (const auto& v : copy.graph().output())
    add(v);
  return out;
}

ptq::result<tensor_values> float_values(const onnx::TensorProto& t, const std::string& path) {
  tensor_values out;
  std::size_t n = 1;
  const std::string at = "--onnx '" + path + "': initializer '" + t.name() + "' ";
  for (const auto d : t.dims()) {
    if (d < 0)
      return make_error(errc::onnx_model_invalid, at + "has dimension " + std::to_string(d));
    out.shape.push_back(static_cast<std::size_t>(d));
    n *= static_cast<std::size_t>(d);
  }
  if (t.data_type() != onnx::TensorProto::FLOAT) {
    return make_error(errc::unsupported_dtype,
                      at + "is not float32 (data_type " + std::to_string(t.data_type()) + ")");
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != n * sizeof(float)) {
      return make_error(errc::onnx_model_invalid,
                        at + "holds " + std::to_string(t.raw_data().size()) +
                            " bytes, its shape needs " + std::to_string(n * sizeof(float)));
    }
    out.data.resize(n);
    std::memcpy(out.data.data(), t.raw_data().data(), n * sizeof(float));  // little-endian host
  } else {
    if (static_cast<std::size_t>(t.float_data_size()) != n) {
      return make_error(errc::onnx_model_invalid,
                        at + "holds " + std::to_string(t.float_data_size()) +
                            " values, its shape needs " + std::to_string(n));
    }
    out.data.assign(t.float_data().begin(), t.float_data().end());
  }
  return out;
}

const onnx::AttributeProto* find_attribute(const onnx::NodeProto& n, std::string_view name) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name)
      return &a;
  }
  return nullptr;
}

std::int64_t int_attribute(const onnx::NodeProto& n, std::string_view name, std::int64_t fallback) {
  const auto* a = find_attribute(n, name);
  return a ? a->i() : fallback;
}

std::string node_label(const onnx::NodeProto& n, int index) {
  return n.name().empty() ? n.op_type() + " #" + std::to_string(index) : n.name();
}

bool is_weighted_op(const std::string& op) {
  return op == "Conv" || op == "ConvTranspose" || op == "Gemm" || op == "MatMul";
}

bool weight_is_k_by_n(const onnx::NodeProto& n) {
  return n.op_type() == "MatMul" || (n.op_type() == "Gemm" && int_attribute(n, "transB", 0) == 0);
}

graph_view::graph_view(const onnx::GraphProto& g) : g_(&g) {
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    for (int k = 0; k < n.input_size(); ++k) {
      if (!n.input(k).empty())
        consumers_[n.input(k)].push_back({i, k});
    }
    for (const auto& o : n.output()) {
      if (!o.empty())
        producers_[o] = i;
    }
  }
  for (const auto& t : g.initializer())
    initializers_[t.name()] = &t;
  for (const auto& o : g.output())
    outputs_.insert(o.name());
  for (const auto& v : g.input()) {
    if (!initializers_.count(v.name()))
      inputs_.insert(v.name());
  }
}

const std::vector<tensor_use>& graph_view::consumers(const std::string& tensor) const {
  static const std::vector<tensor_use> none;
  const auto it = consumers_.find(tensor);
  return it == consumers_.end() ? none : it->second;
}

int graph_view::producer(const std::string& tensor) const {
  const auto it = producers_.find(tensor);
  return it == producers_.end() ? -1 : it->second;
}

const onnx::TensorProto* graph_view::initializer(const std::string& tensor) const {
  const auto it = initializers_.find(tensor);
  return it == initializers_.end() ? nullptr : it->second;
}

const onnx::TensorProto* graph_view::constant(const std::string& tensor) const {
  std::string t = tensor;
  for (int hops = 0; hops <= g_->node_size(); ++hops) {  // a chain cannot be longer
    if (const auto* init = initializer(t))
      return init;
    const int p = producer(t);
    if (p < 0 || g_->node(p).op_type() != "Identity" || g_->node(p).input_size() != 1)
      return nullptr;
    t = g_->node(p).input(0);
  }
  return nullptr;
}

bool graph_view::is_graph_output(const std::string& tensor) const {
  return outputs_.count(tensor) != 0;
}

bool graph_view::is_graph_input(const std::string& tensor) const {
  return inputs_.count(tensor) != 0;
}

}  // namespace ptq_cli::onnx_tool
