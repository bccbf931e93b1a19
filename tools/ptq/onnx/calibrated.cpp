// The calibrated graph (calibrated.hpp): the layers matched to their nodes, the DMQ factors
// placed, the graph edited, and what each quantized layer deploys with.
#include "calibrated.hpp"

#include <utility>

#include "calibrated_layer.hpp"
#include "dmq_fold.hpp"

namespace ptq_cli::onnx_tool {

using ptq::errc;
using ptq::make_error;

namespace {

/// The BatchNormalization that reads node `node`'s output and nothing else does, with the
/// manifest's BatchNorm tensors; -1 when there is none.
[[nodiscard]] int batch_norm_after(const graph_view& v, int node, const ptq::manifest_layer& m) {
  const std::string out = v.node(node).output(0);
  const auto& users = v.consumers(out);
  if (users.size() != 1 || v.is_graph_output(out) || users.front().input != 0)
    return -1;
  const auto& bn = v.node(users.front().node);
  if (bn.op_type() != "BatchNormalization" || bn.output_size() != 1 || bn.input_size() != 5)
    return -1;
  for (int k = 0; k < 4; ++k) {
    const auto* want = v.constant(m.batch_norm_names[static_cast<std::size_t>(k)]);
    if (want == nullptr || v.constant(bn.input(k + 1)) != want)
      return -1;
  }
  return users.front().node;
}

/// One matched layer's work: its calibrated weight and bias, the BatchNorm after it, and for a
/// quantized layer its codes (with a kept BatchNorm folded after them when asked to).
[[nodiscard]] ptq::result<layer_work> work_of(const graph_view& view, const matched_layer& ml,
                                              const ptq::qdq_table& table,
                                              const calibration_layers& layers,
                                              const calibrated_options& options,
                                              std::vector<ptq::error>& warnings) {
  const std::string& name = ml.manifest->desc.name;
  const auto it = layers.find(name);
  if (it == layers.end()) {
    return make_error(errc::onnx_unsupported,
                      "layer '" + name + "': the calibration has no weights for it");
  }
  layer_work w;
  w.manifest = ml.manifest;
  w.node = ml.node;
  w.table = table.find(name);
  w.calibration = &it->second;
  w.weight = it->second.weight;
  w.bias = it->second.bias;
  if (ml.manifest->desc.batch_norm)
    w.batch_norm = batch_norm_after(view, ml.node, *ml.manifest);
  if (it->second.fused) {
    if (w.batch_norm < 0) {
      return make_error(errc::onnx_unsupported,
                        "layer '" + name + "': calibration folded its BatchNorm, but the output '" +
                            view.node(ml.node).output(0) +
                            "' of its node is not read by exactly one BatchNormalization with "
                            "the manifest's tensors");
    }
    w.fold_batch_norm = true;
  }
  if (!has_codes(w))
    return w;
  quantize_codes(w);
  if (it->second.fused || w.batch_norm < 0 || !options.fold_kept_batch_norms)
    return w;
  auto folded = fold_after_quantization(w);
  if (!folded)
    return folded.error();
  if (!folded.value()) {
    warnings.emplace_back(errc::onnx_layer_float, ptq::severity::warning,
                          "layer '" + name +
                              "': its BatchNorm stays apart: a channel with a negative BatchNorm "
                              "scale holds the weight code -128, whose negation int8 cannot hold");
  }
  return w;
}

/// Every layer of the table, and every layer whose BatchNorm calibration fused, matched to its
/// node, in the manifest's order.
[[nodiscard]] ptq::result<std::vector<layer_work>> works_of(
    const graph_view& view, const std::string& path, const ptq::model_manifest& manifest,
    const ptq::qdq_table& table, const calibration_layers& layers,
    const calibrated_options& options, std::vector<ptq::error>& warnings) {
  std::vector<std::string> names;
  for (const auto& l : manifest.layers) {
    const auto it = layers.find(l.desc.name);
    if (table.find(l.desc.name) || (it != layers.end() && it->second.fused))
      names.push_back(l.desc.name);
  }
  auto matched = match_layers(view, manifest, path, names);
  if (!matched)
    return matched.error();
  std::vector<layer_work> work;
  for (const auto& ml : matched.value()) {
    auto w = work_of(view, ml, table, layers, options, warnings);
    if (!w)
      return w.error();
    work.push_back(std::move(w).value());
  }
  return work;
}

/// DMQ factors 1/b to fold into a float node's constants.
struct constant_fold {
  int node;
  std::vector<float> factors;
};

/// Places each DMQ layer's 1/b: into the producing layer of `work` where the path from it
/// allows (its channel factors), into a float producer's constants (returned), else a Div
/// before the layer (W1255 says why; always with dmq_mode::exact).
[[nodiscard]] std::vector<constant_fold> place_dmq_factors(const graph_view& view,
                                                           std::vector<layer_work>& work,
                                                           dmq_mode mode,
                                                           std::vector<ptq::error>& warnings) {
  const auto work_at = [&](int node) -> layer_work* {
    for (auto& w : work) {
      if (w.node == node || (w.fold_batch_norm && w.batch_norm == node))
        return &w;
    }
    return nullptr;
  };
  std::vector<constant_fold> float_folds;
  for (auto& w : work) {
    if (!w.table || w.table->dmq_factors.empty())
      continue;
    const auto& b = w.table->dmq_factors;
    if (mode == dmq_mode::exact) {
      w.divide = b;
      continue;
    }
    auto fold = find_dmq_fold(view, w.node, b);
    if (fold.target < 0) {
      w.divide = b;
      warnings.emplace_back(errc::onnx_dmq_divide, ptq::severity::warning,
                            "layer '" + w.manifest->desc.name + "': its " +
                                std::to_string(b.size()) +
                                " DMQ factors stay a Div before the layer: " + fold.reason);
      continue;
    }
    if (auto* p = work_at(fold.target); p != nullptr && p != &w) {
      w.folded_into = node_label(view.node(p->node), p->node);
      divide_channels(*p, fold.factors);
    } else {
      w.folded_into = node_label(view.node(fold.target), fold.target);
      float_folds.push_back({fold.target, std::move(fold.factors)});
    }
  }
  return float_folds;
}

/// A float node's constant input `k` (or a BatchNormalization's scale/shift) divided by b along
/// its output channels, written through `edit`.
void divide_constant(graph_edit& edit, const graph_view& v, int node, int k, int axis,
                     const std::vector<float>& b, const std::string& path) {
  const auto* t = v.constant(v.node(node).input(k));
  auto values = float_values(*t, path);
  if (!values)
    return;  // not float32: left as it is (find_dmq_fold saw a constant of the right size)
  std::vector<std::int64_t> dims(values->shape.begin(), values->shape.end());
  std::size_t inner = 1;
  for (std::size_t d = static_cast<std::size_t>(axis) + 1; d < values->shape.size(); ++d)
    inner *= values->shape[d];
  const std::size_t c_dim =
      values->shape.empty() ? 1 : values->shape[static_cast<std::size_t>(axis)];
  for (std::size_t i = 0; i < values->data.size(); ++i)
    values->data[i] /= b[(i / inner) % c_dim];
  edit.set_float_input(node, k, dims, values->data);
}

/// Divides each float producer's weight and bias (a BatchNormalization's scale and shift) by
/// its fold's factors.
void apply_constant_folds(graph_edit& edit, const graph_view& view,
                          const std::vector<constant_fold>& folds, const std::string& path) {
  for (const auto& f : folds) {
    const auto& n = view.node(f.node);
    if (n.op_type() == "BatchNormalization") {
      divide_constant(edit, view, f.node, 1, 0, f.factors, path);
      divide_constant(edit, view, f.node, 2, 0, f.factors, path);
      continue;
    }
    const int axis = n.op_type() == "ConvTranspose" || weight_is_k_by_n(n) ? 1 : 0;
    divide_constant(edit, view, f.node, 1, axis, f.factors, path);  // grouped ConvTranspose: no
    if (n.input_size() > 2 && !n.input(2).empty())
      divide_constant(edit, view, f.node, 2, 0, f.factors, path);
  }
}

/// Replaces every Identity of a constant by an initializer of its output's name holding the
/// constant (onnx2ncnn has no Identity layer; torch writes them for shared initializers).
void inline_constant_identities(graph_edit& edit, const graph_view& v) {
  const auto& g = v.graph();
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    if (n.op_type() != "Identity" || n.output_size() != 1 || v.is_graph_output(n.output(0)))
      continue;
    const auto* c = v.constant(n.input(0));
    if (c == nullptr)
      continue;
    auto& t = *edit.graph().add_initializer();
    t = *c;
    t.set_name(n.output(0));
    edit.remove_node(i);
    edit.release(n.input(0));
  }
}

/// Writes a layer into its node: the BatchNorm folded into it removed, the deployed weight
/// (fake-quantized for a quantized layer) and bias set.
void write_layer(onnx::GraphProto& g, graph_edit& edit, layer_work& w) {
  auto& node = *g.mutable_node(w.node);
  const auto& m = *w.manifest;
  if (w.fold_batch_norm) {
    const auto& bn = g.node(w.batch_norm);
    for (int k = 1; k < 5; ++k)
      edit.release(bn.input(k));
    edit.vanish(node.output(0));
    node.set_output(0, bn.output(0));
    edit.remove_node(w.batch_norm);
  }
  if (m.desc.type == ptq::layer_type::avg_pool2d)
    return;
  if (has_codes(w))
    dequantize_codes(w);
  const std::vector<std::size_t>& shape = m.desc.weight.shape;
  std::vector<std::int64_t> dims;
  const auto values = to_model_layout(w.weight, shape, node, dims);
  edit.set_float_input(w.node, 1, dims, values);
  if (w.bias.empty() || node.op_type() == "MatMul")
    return;
  const std::vector<std::int64_t> bdims = {static_cast<std::int64_t>(w.bias.size())};
  if (node.input_size() > 2 && !node.input(2).empty()) {
    edit.set_float_input(w.node, 2, bdims, w.bias);
    return;
  }
  while (node.input_size() < 2)
    node.add_input("");
  node.add_input(edit.add_floats(m.desc.name + "_fused_bias", bdims, w.bias));
}

/// A Div by the layer's DMQ factors before it, when they stay one (along axis 1).
void insert_dmq_div(onnx::GraphProto& g, graph_edit& edit, const layer_work& w) {
  if (w.divide.empty())
    return;
  auto& node = *g.mutable_node(w.node);
  std::vector<std::int64_t> dims = {static_cast<std::int64_t>(w.divide.size())};
  if (w.manifest->desc.type != ptq::layer_type::linear) {  // [C, 1, …]: along axis 1
    for (std::size_t d = 2; d < w.manifest->desc.weight.rank(); ++d)
      dims.push_back(1);
  }
  const std::string& name = w.manifest->desc.name;
  const std::string factors = edit.add_floats(name + "_dmq_factors", dims, w.divide);
  const std::string balanced = edit.unique(name + "_input_balanced");
  edit.add_node("Div", name + "_dmq_Div", {node.input(0), factors}, {balanced});
  node.set_input(0, balanced);
}

/// The tensors of a layer's node after the edits (names survive the edit's finish, which
/// renumbers nodes).
struct node_tensors {
  std::string output, input, weight;
};

/// What a quantized layer deploys with, its tensors those of the finished graph `g`.
[[nodiscard]] deployed_layer deployed(layer_work& w, node_tensors t, const onnx::GraphProto& g,
                                      const graph_view& done) {
  deployed_layer d;
  d.manifest = w.manifest;
  d.table = w.table;
  d.output = std::move(t.output);
  d.input = std::move(t.input);
  d.weight = std::move(t.weight);
  const int node = done.producer(d.output);
  // ncnn's onnx2ncnn names a layer by its node's name, or its first output without one.
  d.node = node < 0 || g.node(node).name().empty() ? d.output : g.node(node).name();
  d.codes = std::move(w.codes);
  d.weight_shape = w.manifest->desc.weight.shape;
  d.channel_scale = std::move(w.channel_scale);
  d.bias = std::move(w.bias);
  d.fused_batch_norm = w.calibration->fused;
  d.folded_kept_batch_norm = w.fold_batch_norm && !w.calibration->fused;
  d.dmq_divided = !w.divide.empty();
  d.dmq_folded_into = std::move(w.folded_into);
  return d;
}

}  // namespace

ptq::result<calibrated_model> make_calibrated_model(model_file model,
                                                    const ptq::model_manifest& manifest,
                                                    const ptq::qdq_table& table,
                                                    const calibration_layers& layers,
                                                    const calibrated_options& options) {
  calibrated_model out;
  out.model = std::move(model);
  auto& g = *out.model.model.mutable_graph();
  const std::string& path = out.model.path;
  const graph_view view(g);
  auto works = works_of(view, path, manifest, table, layers, options, out.warnings);
  if (!works)
    return works.error();
  auto& work = works.value();
  const auto float_folds = place_dmq_factors(view, work, options.dmq, out.warnings);

  graph_edit edit(g);
  inline_constant_identities(edit, view);
  apply_constant_folds(edit, view, float_folds, path);
  for (auto& w : work)
    write_layer(g, edit, w);
  for (const auto& w : work)
    insert_dmq_div(g, edit, w);
  std::vector<node_tensors> after;
  for (const auto& w : work) {
    const auto& n = g.node(w.node);
    after.push_back({n.output(0), n.input(0),
                     w.manifest->desc.type == ptq::layer_type::avg_pool2d ? "" : n.input(1)});
  }
  edit.finish();

  const graph_view done(g);
  for (const auto& row : table.layers) {
    for (std::size_t i = 0; i < work.size(); ++i) {
      if (work[i].table == &row)
        out.layers.push_back(deployed(work[i], std::move(after[i]), g, done));
    }
  }
  return out;
}

}  // namespace ptq_cli::onnx_tool
