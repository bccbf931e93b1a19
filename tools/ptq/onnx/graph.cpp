// The ONNX graph helpers (graph.hpp).
#include "graph.hpp"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <cstring>
#include <exception>
#include <functional>
#include <queue>
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

/// Every tensor name the nodes of `g` (and of their subgraphs) read.
void names_read(const onnx::GraphProto& g, std::set<std::string>& out) {
  for (const auto& n : g.node()) {
    for (const auto& i : n.input())
      out.insert(i);
    for (const auto& a : n.attribute()) {
      if (a.has_g())
        names_read(a.g(), out);
      for (const auto& sub : a.graphs())
        names_read(sub, out);
    }
  }
}

}  // namespace

ptq::result<model_file> load_model(const std::string& path) {
  auto bytes = ptq::read_file(path, max_onnx_bytes);
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

graph_edit::graph_edit(onnx::GraphProto& g) : g_(&g) {
  for (const auto& t : g.initializer())
    used_.insert(t.name());
  for (const auto& n : g.node()) {
    used_.insert(n.name());
    for (const auto& o : n.output())
      used_.insert(o);
    for (const auto& i : n.input())
      used_.insert(i);
  }
  for (const auto& v : g.input())
    used_.insert(v.name());
  for (const auto& v : g.output())
    used_.insert(v.name());
}

std::string graph_edit::unique(const std::string& base) {
  std::string n = base;
  for (int i = 1; used_.count(n); ++i)
    n = base + "_" + std::to_string(i);
  used_.insert(n);
  return n;
}

std::string graph_edit::add_initializer(const std::string& base, int type,
                                        const std::vector<std::int64_t>& dims, const void* data,
                                        std::size_t bytes) {
  auto& t = *g_->add_initializer();
  t.set_name(unique(base));
  t.set_data_type(type);
  for (const auto d : dims)
    t.add_dims(d);
  t.set_raw_data(data, bytes);
  return t.name();
}

std::string graph_edit::add_floats(const std::string& base, const std::vector<std::int64_t>& dims,
                                   const std::vector<float>& values) {
  return add_initializer(base, onnx::TensorProto::FLOAT, dims, values.data(),
                         values.size() * sizeof(float));
}

onnx::NodeProto& graph_edit::add_node(const std::string& op, const std::string& base,
                                      const std::vector<std::string>& inputs,
                                      const std::vector<std::string>& outputs) {
  auto& n = *g_->add_node();
  n.set_op_type(op);
  n.set_name(unique(base));
  for (const auto& i : inputs)
    n.add_input(i);
  for (const auto& o : outputs)
    n.add_output(o);
  return n;
}

void graph_edit::set_float_input(int node, int k, const std::vector<std::int64_t>& dims,
                                 const std::vector<float>& values) {
  auto& n = *g_->mutable_node(node);
  const std::string name = n.input(k);
  int readers = 0;
  for (const auto& other : g_->node()) {
    for (const auto& i : other.input())
      readers += i == name;
  }
  for (const auto& o : g_->output())
    readers += o.name() == name;
  if (readers == 1) {
    for (auto& t : *g_->mutable_initializer()) {
      if (t.name() != name)
        continue;
      t.clear_dims();
      for (const auto d : dims)
        t.add_dims(d);
      t.clear_float_data();
      t.set_data_type(onnx::TensorProto::FLOAT);
      t.set_raw_data(values.data(), values.size() * sizeof(float));
      return;
    }
  }
  release(name);
  n.set_input(k, add_floats(name, dims, values));
}

void graph_edit::drop_dead_identities() {
  auto& g = *g_;
  std::map<std::string, int> readers;
  for (int i = 0; i < g.node_size(); ++i) {
    if (removed_.count(i))
      continue;
    for (const auto& in : g.node(i).input())
      ++readers[in];
  }
  for (const auto& o : g.output())
    ++readers[o.name()];
  // An Identity whose output was released and is read by nothing: torch's shared-initializer
  // Identity of a weight that is now quantized. Its input may then be unused in turn.
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = g.node_size() - 1; i >= 0; --i) {
      const auto& n = g.node(i);
      if (removed_.count(i) || n.op_type() != "Identity" || n.output_size() != 1 ||
          n.input_size() != 1 || !released_.count(n.output(0)) || readers[n.output(0)] != 0)
        continue;
      removed_.insert(i);
      --readers[n.input(0)];
      released_.insert(n.input(0));
      changed = true;
    }
  }
}

void graph_edit::finish() {
  drop_dead_identities();
  auto& g = *g_;
  std::vector<int> kept;
  for (int i = 0; i < g.node_size(); ++i) {
    if (!removed_.count(i))
      kept.push_back(i);
  }
  std::map<std::string, std::size_t> writer;  // tensor -> position in `kept`
  for (std::size_t p = 0; p < kept.size(); ++p) {
    for (const auto& o : g.node(kept[p]).output())
      writer[o] = p;
  }
  // Kahn's algorithm, always taking the earliest ready node: the graph's order is kept, and a
  // new node (appended) runs just before the first node that needs it.
  std::vector<std::vector<std::size_t>> dependents(kept.size());
  std::vector<std::size_t> waiting(kept.size(), 0);
  for (std::size_t p = 0; p < kept.size(); ++p) {
    std::set<std::string> reads;
    std::set<std::string> direct(g.node(kept[p]).input().begin(), g.node(kept[p]).input().end());
    reads.insert(direct.begin(), direct.end());
    for (const auto& a : g.node(kept[p]).attribute()) {  // outer names a subgraph reads
      if (a.has_g())
        names_read(a.g(), reads);
      for (const auto& sub : a.graphs())
        names_read(sub, reads);
    }
    std::set<std::size_t> from;
    for (const auto& r : reads) {
      const auto it = writer.find(r);
      if (!r.empty() && it != writer.end() && it->second != p)
        from.insert(it->second);
    }
    waiting[p] = from.size();
    for (const auto q : from)
      dependents[q].push_back(p);
  }
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> queue;
  for (std::size_t p = 0; p < kept.size(); ++p) {
    if (waiting[p] == 0)
      queue.push(p);
  }
  std::vector<std::size_t> order;
  std::vector<bool> placed(kept.size(), false);
  while (!queue.empty()) {
    const std::size_t p = queue.top();
    queue.pop();
    order.push_back(p);
    placed[p] = true;
    for (const auto d : dependents[p]) {
      if (--waiting[d] == 0)
        queue.push(d);
    }
  }
  for (std::size_t p = 0; p < kept.size(); ++p) {  // a cycle (not from these edits): as it was
    if (!placed[p])
      order.push_back(p);
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (const auto p : order)
    *nodes.Add() = std::move(*g.mutable_node(kept[p]));
  g.mutable_node()->Swap(&nodes);

  std::set<std::string> read;
  names_read(g, read);
  for (const auto& o : g.output())
    read.insert(o.name());
  auto& inits = *g.mutable_initializer();
  for (int i = inits.size() - 1; i >= 0; --i) {
    if (released_.count(inits.Get(i).name()) && !read.count(inits.Get(i).name()))
      inits.DeleteSubrange(i, 1);
  }
  auto& inputs = *g.mutable_input();  // IR < 4 lists initializers as graph inputs too
  for (int i = inputs.size() - 1; i >= 0; --i) {
    if (released_.count(inputs.Get(i).name()) && !read.count(inputs.Get(i).name()))
      inputs.DeleteSubrange(i, 1);
  }
  std::set<std::string> written;
  for (const auto& n : g.node())
    written.insert(n.output().begin(), n.output().end());
  auto& infos = *g.mutable_value_info();
  for (int i = infos.size() - 1; i >= 0; --i) {
    if (vanished_.count(infos.Get(i).name()) && !written.count(infos.Get(i).name()))
      infos.DeleteSubrange(i, 1);
  }
}

}  // namespace ptq_cli::onnx_tool
