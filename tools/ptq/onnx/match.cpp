// Manifest layers to ONNX nodes (match.hpp).
#include "match.hpp"

#include <algorithm>
#include <utility>

#include "../input_files.hpp"

namespace ptq_cli::onnx_tool {

using ptq::errc;
using ptq::make_error;

namespace {

[[nodiscard]] bool op_fits(const std::string& op, ptq::layer_type t) {
  using lt = ptq::layer_type;
  switch (t) {
    case lt::conv1d:
    case lt::conv2d:
    case lt::conv3d:
      return op == "Conv";
    case lt::conv_transpose1d:
    case lt::conv_transpose2d:
      return op == "ConvTranspose";
    case lt::linear:
      return op == "Gemm" || op == "MatMul";
    case lt::avg_pool2d:
      return op == "AveragePool";
  }
  return false;
}

/// "/a/b/" for the layer "a.b": the scope torch.onnx gives the nodes of a module.
[[nodiscard]] std::string torch_scope(const std::string& layer) {
  std::string s = "/" + layer + "/";
  std::replace(s.begin(), s.end(), '.', '/');
  return s;
}

/// The weight inputs of the graph's Conv/ConvTranspose/Gemm/MatMul nodes, for E1252's note.
/// An `onnx::` name is one torch.onnx.export gives a weight it folded a BatchNorm into: the note
/// then says which export flags keep the state_dict names.
[[nodiscard]] std::string weight_candidates(const onnx::GraphProto& g) {
  std::string out;
  bool renamed = false;
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    if (is_weighted_op(n.op_type()) && n.input_size() > 1) {
      out += (out.empty() ? "'" : ", '") + n.input(1) + "' (" + node_label(n, i) + ")";
      renamed = renamed || n.input(1).rfind("onnx::", 0) == 0;
    }
  }
  if (out.empty())
    return "the model has no Conv, ConvTranspose, Gemm or MatMul";
  return "weights of the model: " + out +
         (renamed ? "; an 'onnx::' name is a weight torch.onnx.export folded a BatchNorm into: "
                    "export with do_constant_folding=False and "
                    "training=torch.onnx.TrainingMode.PRESERVE (docs/deploy.md, From PyTorch)"
                  : "");
}

[[nodiscard]] ptq::result<int> match_pool(const graph_view& v, const ptq::manifest_layer& l,
                                          const std::string& path) {
  const auto& g = v.graph();
  const std::string& name = l.desc.name;
  std::string candidates;
  std::vector<int> hits;
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    if (n.op_type() != "AveragePool")
      continue;
    candidates += (candidates.empty() ? "'" : ", '") + node_label(n, i) + "'";
    if (n.name() == name || n.name().rfind(torch_scope(name), 0) == 0)
      hits.push_back(i);
  }
  if (hits.size() == 1)
    return hits.front();
  return make_error(errc::onnx_layer_unmatched,
                    "layer '" + name + "': " +
                        (hits.empty() ? "no AveragePool node of '" + path + "' is named '" + name +
                                            "' or starts with '" + torch_scope(name) + "'"
                                      : "several AveragePool nodes of '" + path + "' match"),
                    candidates.empty() ? "the model has no AveragePool node"
                                       : "AveragePool nodes: " + candidates);
}

/// The weighted node reading the layer's weight: by the tensor name first, else by the
/// initializer both resolve to (the manifest names the initializer, the node reads it through
/// an Identity, or the other way round).
[[nodiscard]] ptq::result<int> match_weighted(const graph_view& v, const ptq::manifest_layer& l,
                                              const std::string& path) {
  const auto& g = v.graph();
  const std::string& name = l.desc.name;
  const auto* want = v.constant(l.weight_name);
  std::vector<int> direct, resolved;
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    if (!is_weighted_op(n.op_type()) || n.input_size() < 2)
      continue;
    if (n.input(1) == l.weight_name)
      direct.push_back(i);
    else if (want != nullptr && v.constant(n.input(1)) == want)
      resolved.push_back(i);
  }
  const auto& hits = direct.empty() ? resolved : direct;
  if (hits.empty()) {
    return make_error(errc::onnx_layer_unmatched,
                      "layer '" + name + "': no Conv, ConvTranspose, Gemm or MatMul node of '" +
                          path + "' reads the weight '" + l.weight_name + "'",
                      weight_candidates(g));
  }
  const std::string read = g.node(hits.front()).input(1);
  if (hits.size() > 1 || v.consumers(read).size() > 1) {
    return make_error(
        errc::onnx_unsupported,
        "layer '" + name + "': the weight '" + read + "' of '" + path + "' is read by " +
            std::to_string(std::max<std::size_t>(hits.size(), v.consumers(read).size())) +
            " inputs; a shared weight cannot get one layer's quantization");
  }
  const auto& n = g.node(hits.front());
  if (!op_fits(n.op_type(), l.desc.type)) {
    return make_error(errc::onnx_unsupported,
                      "layer '" + name + "' is a " + std::string(ptq::to_string(l.desc.type)) +
                          " in the manifest, but its weight '" + l.weight_name + "' is read by " +
                          n.op_type() + " node '" + node_label(n, hits.front()) + "'");
  }
  return hits.front();
}

}  // namespace

model_weights::model_weights(const graph_view& v, std::string model_path)
    : view(&v), path(std::move(model_path)) {
  for (const auto& n : v.graph().node()) {
    if (is_weighted_op(n.op_type()) && n.input_size() > 1 && weight_is_k_by_n(n))
      transposed.insert(n.input(1));
  }
}

ptq::result<tensor_values> model_weights::get(std::string_view name) const {
  const std::string key(name);
  const auto* t = view->constant(key);
  if (t == nullptr) {
    return make_error(errc::tensor_not_found,
                      "tensor '" + key + "' is not an initializer of '" + path + "'");
  }
  auto v = float_values(*t, path);
  bool k_by_n = transposed.count(key) != 0;
  for (const auto& other : transposed)  // read through an Identity under another name
    k_by_n = k_by_n || view->constant(other) == t;
  if (!v || !k_by_n)
    return v;
  if (v->shape.size() != 2) {
    return make_error(errc::onnx_unsupported, "--onnx '" + path + "': initializer '" + key +
                                                  "' of a Gemm/MatMul is not 2-D");
  }
  const std::size_t k = v->shape[0], n = v->shape[1];
  tensor_values tr;
  tr.shape = {n, k};
  tr.data.resize(k * n);
  for (std::size_t i = 0; i < k; ++i) {
    for (std::size_t j = 0; j < n; ++j)
      tr.data[j * k + i] = v->data[i * n + j];
  }
  return tr;
}

ptq::result<ptq::model_manifest> read_manifest(const std::string& manifest_path,
                                               const model_weights& weights) {
  if (manifest_path.empty()) {
    return make_error(errc::invalid_argument,
                      "the ONNX exports need --model MANIFEST.json: its `weight` fields name the "
                      "initializers that find each layer's node");
  }
  auto text = read_text_input(manifest_path, "--model");
  if (!text)
    return text.error();
  const auto j = nlohmann::json::parse(text.value(), nullptr, false);
  if (j.is_object() && j.contains("layers") && j["layers"].is_array()) {
    for (const auto& e : j["layers"]) {
      if (!e.is_object() || !e.contains("weight") || !e["weight"].is_string())
        continue;
      const auto w = e["weight"].get<std::string>();
      if (weights.view->constant(w) == nullptr) {
        const std::string layer =
            e.contains("name") && e["name"].is_string() ? e["name"].get<std::string>() : "?";
        return make_error(errc::onnx_layer_unmatched,
                          "layer '" + layer + "': its weight '" + w +
                              "' (--model) is not an initializer of '" + weights.path + "'",
                          weight_candidates(weights.view->graph()));
      }
    }
  }
  auto manifest = ptq::try_parse_manifest(text.value(), weights);
  if (!manifest) {
    auto e = manifest.error();
    e.message = "--model '" + manifest_path + "': " + e.message;
    return e;
  }
  return manifest;
}

ptq::result<std::vector<matched_layer>> match_layers(const graph_view& view,
                                                     const ptq::model_manifest& manifest,
                                                     const std::string& model_path,
                                                     const std::vector<std::string>& layers) {
  std::vector<matched_layer> out;
  for (const auto& l : manifest.layers) {
    if (!layers.empty() && std::find(layers.begin(), layers.end(), l.desc.name) == layers.end())
      continue;
    auto node = l.desc.type == ptq::layer_type::avg_pool2d ? match_pool(view, l, model_path)
                                                           : match_weighted(view, l, model_path);
    if (!node)
      return node.error();
    out.push_back({&l, node.value()});
  }
  return out;
}

}  // namespace ptq_cli::onnx_tool
