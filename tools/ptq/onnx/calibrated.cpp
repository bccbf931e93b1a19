// The calibrated graph (calibrated.hpp).
#include "calibrated.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "dmq_fold.hpp"
#include "ptq/algorithms/layer/conv_bn_fusion.hpp"
#include "ptq/kernels/quantize.hpp"

namespace ptq_cli::onnx_tool {

using ptq::errc;
using ptq::make_error;

weight_channels channels_of(const ptq::manifest_layer& m) {
  weight_channels w;
  const auto& s = m.desc.weight.shape();
  const std::size_t n = m.desc.weight.size();
  w.channel.resize(n);
  if (ptq::is_conv_transpose(m.desc.type)) {
    // C × M/g × k…: AMCT's Cout index of group gi, column j is gi·(M/g) + j.
    const std::size_t g = m.desc.conv.groups, per = n / (s[0] * s[1]);
    w.cout = s[1] * g;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t ci = i / (s[1] * per), j = (i / per) % s[1];
      w.channel[i] = (ci / (s[0] / g)) * s[1] + j;
    }
    return w;
  }
  w.cout = s[0];
  const std::size_t per = n / s[0];
  for (std::size_t i = 0; i < n; ++i)
    w.channel[i] = i / per;
  return w;
}

namespace {

/// A layer's state while the graph is built.
struct layer_work {
  const ptq::manifest_layer* manifest = nullptr;
  const ptq::qdq_layer* table = nullptr;  ///< null: not quantized (a fused BatchNorm only)
  const calibrated_layer* calibration = nullptr;
  int node = -1;
  int batch_norm = -1;           ///< the BatchNormalization after the node, when there is one
  bool fold_batch_norm = false;  ///< calibrated fusion or the kept one folded after quantization
  std::vector<float> weight;     ///< float weight of the calibrated graph (manifest layout)
  std::vector<std::int8_t> codes;
  std::vector<float> channel_scale;
  std::vector<float> bias;
  std::vector<float> divide;  ///< factors of a Div before the layer
  std::string folded_into;
};

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

/// The weight in the model's own layout: a K×N weight (Gemm transB=0, MatMul) transposed back
/// from the manifest's N×K.
template <class T>
[[nodiscard]] std::vector<T> to_model_layout(const std::vector<T>& v,
                                             const std::vector<std::size_t>& shape,
                                             const onnx::NodeProto& node,
                                             std::vector<std::int64_t>& dims) {
  dims.assign(shape.begin(), shape.end());
  if (!weight_is_k_by_n(node))
    return v;
  const std::size_t n = shape[0], k = shape[1];
  std::vector<T> t(v.size());
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t i = 0; i < k; ++i)
      t[i * n + j] = v[j * k + i];
  }
  dims = {static_cast<std::int64_t>(k), static_cast<std::int64_t>(n)};
  return t;
}

/// Codes of the layer's weight with its scales, ties to even, as ptq's quantizer gives them.
void quantize_codes(layer_work& w) {
  const auto& qw = *w.table->weight;
  const auto ch = channels_of(*w.manifest);
  ptq::kernels::quantizer qz;
  qz.qmin = static_cast<float>(qw.qmin);
  qz.qmax = static_cast<float>(qw.qmax);
  const auto& sw = qw.scales;
  w.codes.resize(w.calibration->weight.size());
  for (std::size_t i = 0; i < w.codes.size(); ++i) {
    qz.scale = sw[sw.size() == 1 ? 0 : ch.channel[i]];
    w.codes[i] = static_cast<std::int8_t>(ptq::kernels::quant_code(w.calibration->weight[i], qz));
  }
}

/// Folds the kept BatchNorm after quantization: its scale a_c joins the channel scale (the
/// codes of a channel with a_c < 0 negated, so the scales stay positive), its shift the bias.
/// Returns false (nothing changed) when a negative channel holds the code -128.
[[nodiscard]] ptq::result<bool> fold_after_quantization(layer_work& w) {
  const auto& m = *w.manifest;
  const auto ch = channels_of(m);
  auto f =
      ptq::conv_bn_fusion_factors(w.codes.size(), w.bias, ch.cout, *m.desc.batch_norm, m.desc.name);
  if (!f)
    return make_error(errc::onnx_unsupported, "layer '" + m.desc.name + "': " + f.error().message);
  for (std::size_t i = 0; i < w.codes.size(); ++i) {
    if (f->scale[ch.channel[i]] < 0.0f && w.codes[i] == -128)
      return false;
  }
  for (std::size_t i = 0; i < w.codes.size(); ++i) {
    if (f->scale[ch.channel[i]] < 0.0f)
      w.codes[i] = static_cast<std::int8_t>(-w.codes[i]);
  }
  w.channel_scale.resize(ch.cout);
  for (std::size_t c = 0; c < ch.cout; ++c)
    w.channel_scale[c] = std::fabs(f->scale[c]);
  w.bias = std::move(f->bias);
  w.fold_batch_norm = true;
  return true;
}

/// Divides output channel c of a layer's deployed weight and bias by b[c].
void divide_channels(layer_work& w, const std::vector<float>& b) {
  if (w.table && w.table->weight) {  // quantized: the factors go after the codes
    if (w.channel_scale.empty())
      w.channel_scale.assign(b.size(), 1.0f);
    for (std::size_t c = 0; c < b.size(); ++c)
      w.channel_scale[c] /= b[c];
  } else {
    const auto ch = channels_of(*w.manifest);
    for (std::size_t i = 0; i < w.weight.size(); ++i)
      w.weight[i] /= b[ch.channel[i]];
  }
  for (std::size_t c = 0; c < w.bias.size() && c < b.size(); ++c)
    w.bias[c] /= b[c];
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
    layer_work w;
    w.manifest = ml.manifest;
    w.node = ml.node;
    w.table = table.find(ml.manifest->desc.name);
    const auto it = layers.find(ml.manifest->desc.name);
    if (it == layers.end()) {
      return make_error(errc::onnx_unsupported, "layer '" + ml.manifest->desc.name +
                                                    "': the calibration has no weights "
                                                    "for it");
    }
    w.calibration = &it->second;
    w.weight = it->second.weight;
    w.bias = it->second.bias;
    if (ml.manifest->desc.batch_norm)
      w.batch_norm = batch_norm_after(view, ml.node, *ml.manifest);
    if (it->second.fused) {
      if (w.batch_norm < 0) {
        const std::string node_out = view.node(ml.node).output(0);
        return make_error(errc::onnx_unsupported,
                          "layer '" + ml.manifest->desc.name +
                              "': calibration folded its BatchNorm, but the output '" + node_out +
                              "' of its node is not read by exactly one BatchNormalization with "
                              "the manifest's tensors");
      }
      w.fold_batch_norm = true;
    }
    if (w.table && w.table->weight) {
      quantize_codes(w);
      if (!it->second.fused && w.batch_norm >= 0 && options.fold_kept_batch_norms) {
        auto folded = fold_after_quantization(w);
        if (!folded)
          return folded.error();
        if (!folded.value()) {
          out.warnings.push_back(ptq::error(
              errc::onnx_layer_float, ptq::severity::warning,
              "layer '" + ml.manifest->desc.name +
                  "': its BatchNorm stays apart: a channel with a negative BatchNorm scale holds "
                  "the weight code -128, whose negation int8 cannot hold"));
        }
      }
    }
    work.push_back(std::move(w));
  }
  const auto work_at = [&](int node) -> layer_work* {
    for (auto& w : work) {
      if (w.node == node || (w.fold_batch_norm && w.batch_norm == node))
        return &w;
    }
    return nullptr;
  };

  // DMQ: fold 1/b into the producer where the path allows it, else a Div before the layer.
  struct constant_fold {
    int node;
    std::vector<float> factors;
  };
  std::vector<constant_fold> float_folds;
  for (auto& w : work) {
    if (!w.table || w.table->dmq_factors.empty())
      continue;
    const auto& b = w.table->dmq_factors;
    if (options.dmq == dmq_mode::exact) {
      w.divide = b;
      continue;
    }
    auto fold = find_dmq_fold(view, w.node, b);
    if (fold.target < 0) {
      w.divide = b;
      out.warnings.push_back(
          ptq::error(errc::onnx_dmq_divide, ptq::severity::warning,
                     "layer '" + w.manifest->desc.name + "': its " + std::to_string(b.size()) +
                         " DMQ factors stay a Div before the layer: " + fold.reason));
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

  graph_edit edit(g);
  inline_constant_identities(edit, view);
  for (const auto& f : float_folds) {
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
  for (auto& w : work) {
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
      continue;
    const std::vector<std::size_t> shape(m.desc.weight.shape().begin(),
                                         m.desc.weight.shape().end());
    if (w.table && w.table->weight) {  // the fake-quantized weight, times the channel scales
      const auto ch = channels_of(m);
      const auto& sw = w.table->weight->scales;
      w.weight.resize(w.codes.size());
      for (std::size_t i = 0; i < w.codes.size(); ++i) {
        const std::size_t c = ch.channel[i];
        w.weight[i] = static_cast<float>(w.codes[i]) * sw[sw.size() == 1 ? 0 : c];
        if (!w.channel_scale.empty())
          w.weight[i] *= w.channel_scale[c];
      }
    }
    std::vector<std::int64_t> dims;
    const auto values = to_model_layout(w.weight, shape, node, dims);
    edit.set_float_input(w.node, 1, dims, values);
    if (!w.bias.empty() && node.op_type() != "MatMul") {
      const std::vector<std::int64_t> bdims = {static_cast<std::int64_t>(w.bias.size())};
      if (node.input_size() > 2 && !node.input(2).empty()) {
        edit.set_float_input(w.node, 2, bdims, w.bias);
      } else {
        while (node.input_size() < 2)
          node.add_input("");
        node.add_input(edit.add_floats(m.desc.name + "_fused_bias", bdims, w.bias));
      }
    }
  }
  for (auto& w : work) {
    if (w.divide.empty())
      continue;
    auto& node = *g.mutable_node(w.node);
    std::vector<std::int64_t> dims = {static_cast<std::int64_t>(w.divide.size())};
    if (w.manifest->desc.type != ptq::layer_type::linear) {  // [C, 1, …]: along axis 1
      for (std::size_t d = 2; d < w.manifest->desc.weight.dimension(); ++d)
        dims.push_back(1);
    }
    const std::string& name = w.manifest->desc.name;
    const std::string factors = edit.add_floats(name + "_dmq_factors", dims, w.divide);
    const std::string balanced = edit.unique(name + "_input_balanced");
    edit.add_node("Div", name + "_dmq_Div", {node.input(0), factors}, {balanced});
    node.set_input(0, balanced);
  }
  struct node_tensors {
    std::string output, input, weight;
  };
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
      auto& w = work[i];
      if (w.table != &row)
        continue;
      deployed_layer d;
      d.manifest = w.manifest;
      d.table = w.table;
      d.output = after[i].output;
      d.input = after[i].input;
      d.weight = after[i].weight;
      const int node = done.producer(d.output);
      // ncnn's onnx2ncnn names a layer by its node's name, or its first output without one.
      d.node = node < 0 || g.node(node).name().empty() ? d.output : g.node(node).name();
      d.codes = std::move(w.codes);
      d.weight_shape.assign(w.manifest->desc.weight.shape().begin(),
                            w.manifest->desc.weight.shape().end());
      d.channel_scale = std::move(w.channel_scale);
      d.bias = std::move(w.bias);
      d.fused_batch_norm = w.calibration->fused;
      d.folded_kept_batch_norm = w.fold_batch_norm && !w.calibration->fused;
      d.dmq_divided = !w.divide.empty();
      d.dmq_folded_into = std::move(w.folded_into);
      out.layers.push_back(std::move(d));
    }
  }
  return out;
}

}  // namespace ptq_cli::onnx_tool
