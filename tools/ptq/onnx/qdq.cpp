// The QDQ model (qdq.hpp).
#include "qdq.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "placement.hpp"

namespace ptq_cli::onnx_tool {

using ptq::errc;
using ptq::make_error;

namespace {

[[nodiscard]] qdq_params activation_params(const ptq::qdq_activation& a) {
  qdq_params p;
  p.scale = a.scale;
  p.zero_point = a.zero_point;
  p.is_unsigned = a.dtype == ptq::qdq_dtype::uint8;
  return p;
}

onnx::NodeProto& add_qdq_node(graph_edit& ed, const char* op, const std::string& base,
                              const std::string& x, const std::string& scale, const std::string& zp,
                              const std::string& y, std::optional<int> axis) {
  auto& n = ed.add_node(op, base, {x, scale, zp}, {y});
  if (axis) {
    auto* a = n.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(*axis);
  }
  return n;
}

/// Scale and zero-point initializers of one activation grid, named after `base`.
std::pair<std::string, std::string> add_grid(graph_edit& ed, const std::string& base,
                                             const qdq_params& p) {
  const std::string scale =
      ed.add_initializer(base + "_scale", onnx::TensorProto::FLOAT, {}, &p.scale, sizeof p.scale);
  if (p.is_unsigned) {
    const auto z = static_cast<std::uint8_t>(p.zero_point);
    return {scale, ed.add_initializer(base + "_zero_point", onnx::TensorProto::UINT8, {}, &z, 1)};
  }
  const auto z = static_cast<std::int8_t>(p.zero_point);
  return {scale, ed.add_initializer(base + "_zero_point", onnx::TensorProto::INT8, {}, &z, 1)};
}

/// The layer's weight as int8 codes (uint8 with zero point 128 when `as_uint8`) and a
/// DequantizeLinear; returns the axis (-1: per tensor).
[[nodiscard]] ptq::result<int> quantize_weight(graph_edit& ed, int node_index,
                                               const deployed_layer& d, bool as_uint8) {
  auto& node = *ed.graph().mutable_node(node_index);
  const auto& m = *d.manifest;
  const auto& qw = *d.table->weight;
  const std::string at = "layer '" + m.desc.name + "': ";
  if (qw.dtype != ptq::qdq_dtype::int8) {
    return make_error(errc::onnx_unsupported,
                      at + std::to_string(qw.bits) +
                          "-bit weights do not fit the int8 container of a DequantizeLinear");
  }
  const auto ch = channels_of(m);
  const auto& sw = qw.scales;
  const auto& cs = d.channel_scale;
  const bool per_channel = sw.size() > 1 || !cs.empty();
  const bool transpose = weight_is_k_by_n(node);
  const bool conv_transpose = node.op_type() == "ConvTranspose";
  if (per_channel && conv_transpose && m.desc.conv.groups > 1) {
    return make_error(errc::onnx_unsupported,
                      at + "a ConvTranspose with group " + std::to_string(m.desc.conv.groups) +
                          " and per-channel scales: its Cout is not one axis of the weight "
                          "(it is [Cin, Cout/group, k...])");
  }
  std::vector<float> scales(per_channel ? ch.cout : 1);
  for (std::size_t c = 0; c < scales.size(); ++c)
    scales[c] = sw[sw.size() == 1 ? 0 : c] * (cs.empty() ? 1.0f : cs[c]);
  std::vector<std::int64_t> dims(d.weight_shape.begin(), d.weight_shape.end());
  std::vector<std::int8_t> codes = d.codes;
  if (transpose) {  // back to the model's K × N
    const std::size_t n = d.weight_shape[0], k = d.weight_shape[1];
    for (std::size_t j = 0; j < n; ++j) {
      for (std::size_t i = 0; i < k; ++i)
        codes[i * n + j] = d.codes[j * k + i];
    }
    dims = {static_cast<std::int64_t>(k), static_cast<std::int64_t>(n)};
  }
  const std::string& base = d.weight;
  const int type = as_uint8 ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8;
  if (as_uint8) {  // the same grid shifted by 128: the bytes of c + 128
    for (auto& c : codes)
      c = static_cast<std::int8_t>(static_cast<std::uint8_t>(c + 128));
  }
  const std::string q =
      ed.add_initializer(base + "_quantized", type, dims, codes.data(), codes.size());
  const std::vector<std::int64_t> sdims =
      per_channel ? std::vector<std::int64_t>{static_cast<std::int64_t>(scales.size())}
                  : std::vector<std::int64_t>{};
  const std::string s = ed.add_floats(base + "_scale", sdims, scales);
  const std::vector<std::uint8_t> zeros(scales.size(), as_uint8 ? 128 : 0);
  const std::string z =
      ed.add_initializer(base + "_zero_point", type, sdims, zeros.data(), zeros.size());
  const int axis = conv_transpose || transpose ? 1 : 0;
  const std::string dq = ed.unique(base + "_dequantized");
  add_qdq_node(ed, "DequantizeLinear", base + "_DequantizeLinear", q, s, z, dq,
               per_channel ? std::optional<int>(axis) : std::nullopt);
  ed.release(node.input(1));
  node.set_input(1, dq);
  return per_channel ? axis : -1;
}

/// A Linear layer that ends in float, as ONNX Runtime runs it as an int8 kernel (QGemm): a Gemm
/// without a float bias (the bias moves into an Add after it), and a MatMul of 2-D inputs as a
/// Gemm (its optimizer would otherwise fuse MatMul and the bias Add after it into a float Gemm
/// before it looks for int8 patterns). `input` is the layer's input in the calibrated graph.
void float_output_gemm(graph_edit& ed, int node_index, const tensor_shapes& shapes,
                       const std::string& input) {
  auto& node = *ed.graph().mutable_node(node_index);
  if (node.op_type() == "MatMul") {
    const auto it = shapes.find(input);
    if (it != shapes.end() && it->second.size() == 2)
      node.set_op_type("Gemm");  // transB 0: the weight stays K x N, its axis 1
    return;
  }
  if (node.input_size() < 3 || node.input(2).empty())
    return;
  if (find_attribute(node, "beta") != nullptr && find_attribute(node, "beta")->f() != 1.0f)
    return;  // a scaled bias stays where it is (torch writes beta 1)
  const std::string bias = node.input(2);
  const std::string y = node.output(0);
  const std::string before = ed.unique(y + "_before_bias");
  node.mutable_input()->RemoveLast();
  node.set_output(0, before);
  ed.add_node("Add", node.name() + "_bias", {before, bias}, {y});
}

struct qdq_group {
  qdq_params params;
  bool calibrated = false;
  std::vector<int> readers;
  std::string dq;
};

/// The calibrated demands: each quantized layer's input on its activation grid, its weight
/// quantized in the graph, and its summary (the output column filled later).
struct layer_demands {
  std::vector<qdq_layer_summary> summaries;
  demand_map demands;
  std::set<int> nodes;
  std::map<int, std::string> layer_of_node;
};

[[nodiscard]] ptq::result<layer_demands> quantize_layers(graph_edit& ed, const graph_view& view,
                                                         const calibrated_model& model,
                                                         const qdq_form& form) {
  layer_demands out;
  for (const auto& d : model.layers) {
    const int node = view.producer(d.output);
    const auto& act = d.table->activation;
    const std::string& name = d.manifest->desc.name;
    if (act.bits != 8) {
      return make_error(errc::onnx_unsupported,
                        "layer '" + name + "': " + std::to_string(act.bits) +
                            "-bit activations need ONNX opset 21 (int4/int16 QDQ), which "
                            "this exporter does not write; it writes int8/uint8");
    }
    qdq_layer_summary s;
    s.layer = name;
    s.node = d.node;
    s.activation = d.input;
    s.fused_batch_norm = d.fused_batch_norm;
    s.folded_kept_batch_norm = d.folded_kept_batch_norm;
    s.dmq = d.dmq_divided               ? "Div"
            : d.dmq_folded_into.empty() ? ""
                                        : "folded into " + d.dmq_folded_into;
    if (d.table->weight) {
      const bool as_uint8 = form.unsigned_8bit_weights && d.table->weight->bits == 8;
      auto axis = quantize_weight(ed, node, d, as_uint8);
      if (!axis)
        return axis.error();
      s.weight = d.weight;
      s.weight_axis = axis.value();
      s.unsigned_weight = as_uint8;
    }
    out.demands[d.input].push_back({activation_params(act), node, true});
    out.nodes.insert(node);
    out.layer_of_node[node] = name;
    out.summaries.push_back(std::move(s));
  }
  return out;
}

/// The demands on one tensor as QuantizeLinear/DequantizeLinear pairs: uint8 grids are shared
/// by their readers; int8 ones get a pair each (ONNX Runtime's x86 int8-to-uint8 rewrite
/// handles one reader per QuantizeLinear only). Returns the groups, each with its readers
/// rewired to its dequantized tensor.
std::vector<qdq_group> insert_tensor_qdq(graph_edit& ed, const std::string& tensor,
                                         const std::vector<qdq_demand>& list,
                                         const std::map<int, std::string>& layer_of_node) {
  std::vector<qdq_group> groups;
  for (const auto& dm : list) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const qdq_group& gr) {
      return dm.params.is_unsigned && gr.params == dm.params;
    });
    if (it == groups.end()) {
      groups.push_back({dm.params, dm.calibrated, {}, {}});
      it = groups.end() - 1;
    }
    it->readers.push_back(dm.consumer);
  }
  auto& g = ed.graph();
  for (auto& gr : groups) {
    const auto layer = layer_of_node.find(gr.readers.front());
    const std::string base =
        gr.calibrated && layer != layer_of_node.end() ? layer->second + "_input" : tensor;
    const auto [scale, zp] = add_grid(ed, base, gr.params);
    const std::string q = ed.unique(base + "_quantized");
    gr.dq = ed.unique(base + "_dequantized");
    add_qdq_node(ed, "QuantizeLinear", base + "_QuantizeLinear", tensor, scale, zp, q,
                 std::nullopt);
    add_qdq_node(ed, "DequantizeLinear", base + "_DequantizeLinear", q, scale, zp, gr.dq,
                 std::nullopt);
    for (const int r : gr.readers) {
      auto& n = *g.mutable_node(r);
      for (int k = 0; k < n.input_size(); ++k) {
        if (n.input(k) == tensor)
          n.set_input(k, gr.dq);
      }
    }
  }
  return groups;
}

/// The fused placement: a residual Add (or Mul, Concat) whose output is quantized reads the
/// quantized `tensor` too (`dq`), so it runs as one int8 kernel.
void quantize_residual_inputs(onnx::GraphProto& g, const graph_view& view,
                              const std::string& tensor, const std::string& dq,
                              const demand_map& demands) {
  for (const auto& use : view.consumers(tensor)) {
    const auto& n = view.node(use.node);
    const bool quantized_op =
        n.op_type() == "Add" || n.op_type() == "Mul" || n.op_type() == "Concat";
    if (quantized_op && n.output_size() == 1 && demands.count(n.output(0)) &&
        g.node(use.node).input(use.input) == tensor)
      g.mutable_node(use.node)->set_input(use.input, dq);
  }
}

/// Whether layer `d`'s output is quantized, or why it stays float: a Gemm or MatMul ends in
/// float as an int8 kernel does (float_output_gemm); any other op warns (W1256).
[[nodiscard]] std::string output_form(graph_edit& ed, const graph_view& view,
                                      const deployed_layer& d, const layer_demands& q,
                                      const tensor_shapes& shapes,
                                      std::vector<ptq::error>& warnings) {
  if (q.demands.count(d.output))
    return "quantized";
  const int node = view.producer(d.output);
  const auto& op = view.node(node).op_type();
  if (op == "Gemm" || op == "MatMul") {
    float_output_gemm(ed, node, shapes, d.input);
    return "float";
  }
  warnings.emplace_back(
      errc::onnx_layer_float, ptq::severity::warning,
      "layer '" + d.manifest->desc.name + "': no quantized layer reads its output '" + d.output +
          "', so an int8 engine runs its " + op +
          " in float (only a Gemm or MatMul can end in float); quantize the layer that "
          "consumes it, or keep this one in float with skip_layers");
  return "float";
}

}  // namespace

ptq::result<std::vector<qdq_layer_summary>> insert_qdq(calibrated_model& model,
                                                       const qdq_form& form,
                                                       std::vector<ptq::error>& warnings) {
  const bool fused = form.placement == qdq_placement::fused;
  // Shapes first: the edits below append nodes out of order until finish() sorts them.
  const auto shapes = fused ? infer_tensor_shapes(model.model.model) : tensor_shapes{};
  auto& g = *model.model.model.mutable_graph();
  const graph_view view(g);
  graph_edit ed(g);
  auto layers = quantize_layers(ed, view, model, form);
  if (!layers)
    return layers.error();
  auto& q = layers.value();
  if (fused)
    add_fusion_demands(view, q.nodes, shapes, q.demands);
  for (const auto& [tensor, list] : q.demands) {
    const auto groups = insert_tensor_qdq(ed, tensor, list, q.layer_of_node);
    if (fused)
      quantize_residual_inputs(g, view, tensor, groups.front().dq, q.demands);
  }
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    q.summaries[i].output =
        fused ? output_form(ed, view, model.layers[i], q, shapes, warnings) : "float";
  }
  ed.finish();
  return std::move(q.summaries);
}

}  // namespace ptq_cli::onnx_tool
