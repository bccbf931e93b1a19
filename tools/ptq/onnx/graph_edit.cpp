// graph_edit (graph.hpp): the changes the exporters make to an ONNX graph, and finish(), which
// drops what no longer feeds an output and puts the nodes back in a topological order.
#include "graph.hpp"

#include <functional>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ptq_cli::onnx_tool {

namespace {

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
