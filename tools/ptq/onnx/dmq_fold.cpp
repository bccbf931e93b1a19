// Where a DMQ layer's 1/b goes (dmq_fold.hpp).
#include "dmq_fold.hpp"

#include <set>

namespace ptq_cli::onnx_tool {

namespace {

/// Ops through which x / b[c] is the op of x, divided by b[c], channel for channel.
[[nodiscard]] bool homogeneous_per_channel(const onnx::NodeProto& n) {
  static const std::set<std::string> ops = {"Relu",        "LeakyRelu",         "MaxPool",
                                            "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
                                            "Identity"};
  return ops.count(n.op_type()) != 0;
}

[[nodiscard]] std::string in_quotes(const std::string& s) {
  return "'" + s + "'";
}

}  // namespace

std::size_t node_output_channels(const onnx::NodeProto& n, const onnx::TensorProto& weight) {
  if (weight.dims_size() < 2)
    return n.op_type() == "BatchNormalization" && weight.dims_size() == 1
               ? static_cast<std::size_t>(weight.dims(0))
               : 0;
  const auto dim = [&](int i) { return static_cast<std::size_t>(weight.dims(i)); };
  if (n.op_type() == "ConvTranspose")
    return dim(1) * static_cast<std::size_t>(int_attribute(n, "group", 1));
  if (weight_is_k_by_n(n))
    return dim(1);
  return dim(0);
}

dmq_fold find_dmq_fold(const graph_view& view, int layer_node, const std::vector<float>& b) {
  dmq_fold out;
  const auto& g = view.graph();
  std::string t = g.node(layer_node).input(0);
  bool flattened = false;
  for (int hops = 0; hops <= g.node_size(); ++hops) {
    if (view.is_graph_output(t) || view.consumers(t).size() != 1) {
      out.reason =
          "its input " + in_quotes(t) + " is also " +
          (view.is_graph_output(t)
               ? std::string("a graph output")
               : "read by " + std::to_string(view.consumers(t).size() - 1) + " other node(s)") +
          ", which must not see it divided";
      return out;
    }
    const int p = view.producer(t);
    if (p < 0) {
      out.reason = "its input " + in_quotes(t) + " is a graph input, with no node to fold into";
      return out;
    }
    const auto& n = g.node(p);
    if (homogeneous_per_channel(n)) {
      t = n.input(0);
      continue;
    }
    if (n.op_type() == "Flatten" && int_attribute(n, "axis", 1) == 1 && !flattened) {
      flattened = true;
      t = n.input(0);
      continue;
    }
    std::size_t channels = 0;
    if (n.op_type() == "BatchNormalization" && n.output_size() == 1 && n.input_size() >= 5) {
      if (const auto* scale = view.constant(n.input(1)))
        channels = node_output_channels(n, *scale);
    } else if (is_weighted_op(n.op_type()) && n.input_size() >= 2 &&
               !(n.op_type() == "ConvTranspose" && int_attribute(n, "group", 1) != 1)) {
      // A grouped ConvTranspose keeps Cout/g channels on its weight's axis 1: no fold.
      if (const auto* w = view.constant(n.input(1)))
        channels = node_output_channels(n, *w);
    }
    if (channels == 0) {
      out.reason = "node " + in_quotes(node_label(n, p)) + " (" + n.op_type() +
                   ") before it is not a Conv, Gemm, MatMul or BatchNormalization with constant "
                   "parameters, nor positively homogeneous";
      return out;
    }
    if (b.size() == channels) {
      out.factors = b;
    } else if (flattened && b.size() % channels == 0) {
      const std::size_t k = b.size() / channels;
      for (std::size_t c = 0; c < channels; ++c) {
        for (std::size_t j = 1; j < k; ++j) {
          if (b[c * k + j] != b[c * k]) {
            out.reason = "its " + std::to_string(b.size()) + " factors differ within the " +
                         std::to_string(k) + " flattened inputs of each of the " +
                         std::to_string(channels) + " channels of " + in_quotes(node_label(n, p));
            return out;
          }
        }
        out.factors.push_back(b[c * k]);
      }
    } else {
      out.reason = "its " + std::to_string(b.size()) + " factors do not match the " +
                   std::to_string(channels) + " output channels of " + in_quotes(node_label(n, p));
      return out;
    }
    out.target = p;
    return out;
  }
  out.reason = "no producer found";
  return out;
}

}  // namespace ptq_cli::onnx_tool
