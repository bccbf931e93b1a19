// The ONNX QDQ exporter (onnx_qdq.hpp). The only file of ptq that includes ONNX's headers.
//
// What it writes, per quantized layer of the record (spec exporters.md §4.2, §4.3):
//   x ─[Div by the DMQ factors]─ QuantizeLinear(scale_d, zp) ─ DequantizeLinear ─▶ the node
//   W: int8 codes ─ DequantizeLinear(scale_w, zp 0, axis) ─▶ the node's weight input
// The codes are computed here with ptq's own quantizer, on the weight the scales were taken on
// (the BatchNorm folded when calibration folded it, times the DMQ factors), so DequantizeLinear
// gives ptq's fake-quantized weight bit for bit. The DMQ step is a Div rather than the Mul by
// 1/b of the spec: the session divides the activation by b, and x / b is not always x · (1/b)
// in float32, so only the Div keeps the activation codes equal to ptq's.
#include "onnx_qdq.hpp"

#include <algorithm>
#include <iostream>

#include "command.hpp"

namespace ptq_cli {

ptq::result<> apply_onnx_names(ptq::qdq_table& table, const std::string& onnx_path,
                               const std::string& manifest_path) {
  auto names = onnx_names(onnx_path, manifest_path);
  if (!names)
    return names.error();
  for (auto& l : table.layers) {
    const auto it = std::find_if(names->begin(), names->end(),
                                 [&](const onnx_layer_names& n) { return n.layer == l.name; });
    if (it == names->end())
      continue;  // make_qdq_table checked every record layer against the same manifest
    l.activation.tensor = it->activation;
    if (l.weight && !it->weight.empty())
      l.weight->tensor = it->weight;
  }
  return {};
}

int run_onnx_qdq(const onnx_qdq_request& request, bool quiet) {
  auto r = export_onnx_qdq(request);
  if (!r) {
    std::cerr << "ptq export: " << ptq::format_error(r.error());
    return exit_error;
  }
  if (quiet)
    return exit_ok;
  for (const auto& l : r.value()) {
    std::cout << l.layer << ": node " << l.node << ", input " << l.activation << " -> Q/DQ";
    if (l.dmq)
      std::cout << " after Div by the DMQ factors";
    if (!l.weight.empty()) {
      std::cout << ", weight " << l.weight << " -> int8 + DequantizeLinear ("
                << (l.weight_axis < 0 ? std::string("per tensor")
                                      : "axis " + std::to_string(l.weight_axis))
                << ")";
    }
    if (l.fused)
      std::cout << ", BatchNorm folded";
    std::cout << '\n';
  }
  std::cout << "wrote " << request.output_path << '\n';
  return exit_ok;
}

}  // namespace ptq_cli

#if PTQ_WITH_ONNX

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "input_files.hpp"
#include "outputs.hpp"
#include "ptq/algorithms/dmq.hpp"
#include "ptq/config.hpp"
#include "ptq/export/qdq_table.hpp"
#include "ptq/io/atomic_file.hpp"
#include "ptq/kernels/quantize.hpp"
#include "ptq/manifest.hpp"
#include "ptq/session/record.hpp"

namespace ptq_cli {
namespace {

using ptq::errc;
using ptq::make_error;

/// protobuf cannot parse a message of 2 GiB or more; larger models keep their weights as
/// external data, which this exporter does not read.
constexpr std::uint64_t max_onnx_bytes = (std::uint64_t{2} << 30) - 1;

/// The first opset with per-axis QuantizeLinear/DequantizeLinear.
constexpr std::int64_t min_opset = 13;

struct loaded_model {
  onnx::ModelProto model;
  std::int64_t opset = 0;
};

[[nodiscard]] ptq::result<loaded_model> load_model(const std::string& path) {
  auto bytes = ptq::read_file(path, max_onnx_bytes);
  if (!bytes)
    return for_input(bytes.error(), "--onnx");
  loaded_model m;
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

/// The float values of an initializer, in C order.
[[nodiscard]] ptq::result<ptq::io::float_tensor> initializer_values(const onnx::TensorProto& t,
                                                                    const std::string& path) {
  ptq::io::float_tensor out;
  std::size_t n = 1;
  for (const auto d : t.dims()) {
    if (d < 0) {
      return make_error(errc::onnx_model_invalid, "--onnx '" + path + "': initializer '" +
                                                      t.name() + "' has dimension " +
                                                      std::to_string(d));
    }
    out.shape.push_back(static_cast<std::size_t>(d));
    n *= static_cast<std::size_t>(d);
  }
  if (t.data_type() != onnx::TensorProto::FLOAT) {
    return make_error(errc::unsupported_dtype, "--onnx '" + path + "': initializer '" + t.name() +
                                                   "' is not float32 (data_type " +
                                                   std::to_string(t.data_type()) + ")");
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != n * sizeof(float)) {
      return make_error(errc::onnx_model_invalid,
                        "--onnx '" + path + "': initializer '" + t.name() + "' holds " +
                            std::to_string(t.raw_data().size()) + " bytes, its shape needs " +
                            std::to_string(n * sizeof(float)));
    }
    out.data.resize(n);
    std::memcpy(out.data.data(), t.raw_data().data(), n * sizeof(float));  // little-endian host
  } else {
    if (static_cast<std::size_t>(t.float_data_size()) != n) {
      return make_error(errc::onnx_model_invalid,
                        "--onnx '" + path + "': initializer '" + t.name() + "' holds " +
                            std::to_string(t.float_data_size()) + " values, its shape needs " +
                            std::to_string(n));
    }
    out.data.assign(t.float_data().begin(), t.float_data().end());
  }
  return out;
}

/// The model's initializers as the tensor source parse_manifest reads the layers' weights
/// from. A Gemm weight with transB=0 (and a MatMul weight) is K×N; it is shown transposed, in
/// PyTorch's Linear layout N×K, which is what the manifest and the record describe.
struct onnx_weights {
  const onnx::GraphProto* graph = nullptr;
  std::string path;
  std::set<std::string> transposed;

  [[nodiscard]] ptq::result<ptq::io::float_tensor> get(std::string_view name) const {
    for (const auto& t : graph->initializer()) {
      if (t.name() != name)
        continue;
      auto v = initializer_values(t, path);
      if (!v || !transposed.count(t.name()))
        return v;
      if (v->shape.size() != 2) {
        return make_error(errc::onnx_unsupported, "--onnx '" + path + "': initializer '" +
                                                      t.name() + "' of a Gemm/MatMul is not 2-D");
      }
      const std::size_t k = v->shape[0], n = v->shape[1];
      ptq::io::float_tensor tr;
      tr.shape = {n, k};
      tr.data.resize(k * n);
      for (std::size_t i = 0; i < k; ++i) {
        for (std::size_t j = 0; j < n; ++j)
          tr.data[j * k + i] = v->data[i * n + j];
      }
      return tr;
    }
    return make_error(errc::tensor_not_found,
                      "tensor '" + std::string(name) + "' is not an initializer of '" + path + "'");
  }
};

[[nodiscard]] const onnx::AttributeProto* find_attribute(const onnx::NodeProto& n,
                                                         std::string_view name) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name)
      return &a;
  }
  return nullptr;
}

[[nodiscard]] std::int64_t int_attribute(const onnx::NodeProto& n, std::string_view name,
                                         std::int64_t fallback) {
  const auto* a = find_attribute(n, name);
  return a ? a->i() : fallback;
}

/// Whether the weight of node `n` is its input 1 in the K×N layout (Gemm transB=0, MatMul).
[[nodiscard]] bool weight_is_k_by_n(const onnx::NodeProto& n) {
  return n.op_type() == "MatMul" || (n.op_type() == "Gemm" && int_attribute(n, "transB", 0) == 0);
}

[[nodiscard]] bool is_weighted_op(const std::string& op) {
  return op == "Conv" || op == "ConvTranspose" || op == "Gemm" || op == "MatMul";
}

[[nodiscard]] std::string node_label(const onnx::NodeProto& n, int index) {
  return n.name().empty() ? n.op_type() + " #" + std::to_string(index) : n.name();
}

/// The graph's consumers: tensor name -> (node index, input index).
using consumer_map = std::map<std::string, std::vector<std::pair<int, int>>>;

[[nodiscard]] consumer_map consumers_of(const onnx::GraphProto& g) {
  consumer_map c;
  for (int i = 0; i < g.node_size(); ++i) {
    for (int k = 0; k < g.node(i).input_size(); ++k) {
      if (!g.node(i).input(k).empty())
        c[g.node(i).input(k)].emplace_back(i, k);
    }
  }
  return c;
}

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
[[nodiscard]] std::string weight_candidates(const onnx::GraphProto& g) {
  std::string out;
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    if (is_weighted_op(n.op_type()) && n.input_size() > 1)
      out += (out.empty() ? "'" : ", '") + n.input(1) + "' (" + node_label(n, i) + ")";
  }
  return out.empty() ? "the model has no Conv, ConvTranspose, Gemm or MatMul"
                     : "weights of the model: " + out;
}

/// The node a layer is: the only Conv/ConvTranspose/Gemm/MatMul that reads the layer's weight
/// initializer as its input 1 (an AvgPool2d layer, which has no weight: the AveragePool named
/// like the layer or in its torch scope). E1252 lists the candidates.
[[nodiscard]] ptq::result<int> match_node(const onnx::GraphProto& g, const consumer_map& users,
                                          const ptq::manifest_layer& l, const std::string& path) {
  const std::string& name = l.desc.name;
  std::string candidates;
  const auto add = [&](const std::string& c) {
    candidates += (candidates.empty() ? "" : ", ") + c;
  };
  if (l.desc.type == ptq::layer_type::avg_pool2d) {
    std::vector<int> hits;
    for (int i = 0; i < g.node_size(); ++i) {
      const auto& n = g.node(i);
      if (n.op_type() != "AveragePool")
        continue;
      add("'" + node_label(n, i) + "'");
      if (n.name() == name || n.name().rfind(torch_scope(name), 0) == 0)
        hits.push_back(i);
    }
    if (hits.size() == 1)
      return hits.front();
    return make_error(errc::onnx_layer_unmatched,
                      "layer '" + name + "': " +
                          (hits.empty() ? "no AveragePool node of '" + path + "' is named '" +
                                              name + "' or starts with '" + torch_scope(name) + "'"
                                        : "several AveragePool nodes of '" + path + "' match"),
                      candidates.empty() ? "the model has no AveragePool node"
                                         : "AveragePool nodes: " + candidates);
  }
  std::vector<int> hits;
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    if (is_weighted_op(n.op_type()) && n.input_size() > 1 && n.input(1) == l.weight_name)
      hits.push_back(i);
  }
  if (hits.empty()) {
    return make_error(errc::onnx_layer_unmatched,
                      "layer '" + name + "': no Conv, ConvTranspose, Gemm or MatMul node of '" +
                          path + "' reads the weight initializer '" + l.weight_name + "'",
                      weight_candidates(g));
  }
  const auto it = users.find(l.weight_name);
  if (hits.size() > 1 || (it != users.end() && it->second.size() > 1)) {
    return make_error(errc::onnx_unsupported,
                      "layer '" + name + "': the weight '" + l.weight_name + "' of '" + path +
                          "' is read by " + std::to_string(it->second.size()) +
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

[[nodiscard]] onnx::TensorProto make_tensor(const std::string& name, int type,
                                            const std::vector<std::int64_t>& dims, const void* data,
                                            std::size_t bytes) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(type);
  for (const auto d : dims)
    t.add_dims(d);
  t.set_raw_data(data, bytes);
  return t;
}

/// One layer's place in the graph and what goes into it.
struct layer_plan {
  const ptq::manifest_layer* manifest = nullptr;
  const ptq::qdq_layer* q = nullptr;  ///< the layer's row of the QDQ table
  int node = -1;
  bool fused = false;
  std::vector<float> weight;  ///< the weight the scales were taken on (fused when fused)
  std::vector<float> bias;    ///< the fused bias (when fused)
};

/// Names that do not clash with the graph's tensor names.
struct name_pool {
  std::set<std::string> used;
  [[nodiscard]] std::string make(const std::string& base) {
    std::string n = base;
    for (int i = 1; used.count(n); ++i)
      n = base + "_" + std::to_string(i);
    used.insert(n);
    return n;
  }
};

[[nodiscard]] name_pool names_of(const onnx::GraphProto& g) {
  name_pool p;
  for (const auto& t : g.initializer())
    p.used.insert(t.name());
  for (const auto& n : g.node()) {
    p.used.insert(n.name());
    for (const auto& o : n.output())
      p.used.insert(o);
    for (const auto& i : n.input())
      p.used.insert(i);
  }
  for (const auto& v : g.input())
    p.used.insert(v.name());
  return p;
}

/// Reads the manifest with the model's initializers as its tensors. A layer whose `weight` is
/// not an initializer of the model is E1252 (the usual cause: an exporter renamed it, e.g.
/// torch's constant folding gives "onnx::Conv_29"), listing the weights the model has.
[[nodiscard]] ptq::result<ptq::model_manifest> read_manifest(const onnx_qdq_request& r,
                                                             const onnx_weights& weights) {
  if (r.manifest_path.empty()) {
    return make_error(errc::invalid_argument,
                      "onnx-qdq needs --model MANIFEST.json: its `weight` fields name the "
                      "initializers that find each layer's node");
  }
  auto text = read_text_input(r.manifest_path, "--model");
  if (!text)
    return text.error();
  const auto j = nlohmann::json::parse(text.value(), nullptr, false);
  if (j.is_object() && j.contains("layers") && j["layers"].is_array()) {
    for (const auto& e : j["layers"]) {
      if (!e.is_object() || !e.contains("weight") || !e["weight"].is_string())
        continue;
      const auto w = e["weight"].get<std::string>();
      const auto& inits = weights.graph->initializer();
      if (std::none_of(inits.begin(), inits.end(),
                       [&](const onnx::TensorProto& t) { return t.name() == w; })) {
        const std::string layer =
            e.contains("name") && e["name"].is_string() ? e["name"].get<std::string>() : "?";
        return make_error(errc::onnx_layer_unmatched,
                          "layer '" + layer + "': its weight '" + w +
                              "' (--model) is not an initializer of '" + r.onnx_path + "'",
                          weight_candidates(*weights.graph));
      }
    }
  }
  auto manifest = ptq::parse_manifest(text.value(), weights);
  if (!manifest) {
    auto e = manifest.error();
    e.message = "--model '" + r.manifest_path + "': " + e.message;
    return e;
  }
  return manifest;
}

struct parsed_inputs {
  ptq::model_manifest manifest;
  ptq::record_file record;
  ptq::qdq_table table;  ///< the record checked against the manifest (export/qdq_table.hpp)
};

[[nodiscard]] ptq::result<parsed_inputs> read_inputs(const onnx_qdq_request& r,
                                                     const onnx_weights& weights) {
  parsed_inputs in;
  auto manifest = read_manifest(r, weights);
  if (!manifest)
    return manifest.error();
  in.manifest = std::move(manifest).value();
  auto rtext = read_text_input(r.record_path, "--record");
  if (!rtext)
    return rtext.error();
  std::vector<ptq::record_layer_shape> shapes;
  for (const auto& l : in.manifest.layers) {
    ptq::record_layer_shape s;
    s.name = l.desc.name;
    if (l.desc.type != ptq::layer_type::avg_pool2d) {
      s.cout = static_cast<std::uint32_t>(ptq::layer_output_channels(l.desc));
      s.cin = static_cast<std::uint32_t>(ptq::layer_input_channels(l.desc));
    }
    shapes.push_back(s);
  }
  auto record = ptq::try_parse_record(rtext.value(), &shapes);
  if (!record) {
    auto e = record.error();
    e.path = r.record_path;
    return e;
  }
  in.record = std::move(record).value();
  ptq::qdq_options opts;
  opts.unsigned_activations = r.uint8_activations;
  auto table = ptq::make_qdq_table(in.record, in.manifest, opts);
  if (!table) {
    auto e = table.error();
    e.message = "--record '" + r.record_path + "': " + e.message;
    return e;
  }
  in.table = std::move(table).value();
  return in;
}

/// Which layers calibration folded their BatchNorm into, and the folded values: from a session
/// created from the config, which decides it exactly as `ptq calibrate` did.
[[nodiscard]] ptq::result<> plan_fusion(const onnx_qdq_request& r, const parsed_inputs& in,
                                        std::vector<layer_plan>& plans) {
  const bool any_bn = std::any_of(plans.begin(), plans.end(), [](const layer_plan& p) {
    return p.manifest->desc.batch_norm.has_value();
  });
  for (auto& p : plans)
    p.weight.assign(p.manifest->desc.weight.begin(), p.manifest->desc.weight.end());
  if (!any_bn && r.config_path.empty())
    return {};
  std::string with_bn;
  for (const auto& p : plans) {
    if (p.manifest->desc.batch_norm)
      with_bn += (with_bn.empty() ? "'" : ", '") + p.manifest->desc.name + "'";
  }
  if (r.config_path.empty()) {
    return make_error(errc::onnx_fusion_unknown,
                      "layer " + with_bn +
                          " has a BatchNorm; whether calibration folded it into the weights "
                          "is the config's choice (do_fusion, skip_fusion_layers)",
                      "pass the calibration's config with --config");
  }
  auto text = read_text_input(r.config_path, "--config");
  if (!text)
    return text.error();
  auto config = ptq::try_parse_config(text.value());
  if (!config) {
    auto e = config.error();
    e.path = r.config_path;
    return e;
  }
  std::vector<ptq::layer_desc> descs;
  for (const auto& l : in.manifest.layers)
    descs.push_back(l.desc);
  auto session = ptq::calibration_session::create(config.value(), std::move(descs));
  if (!session) {
    auto e = session.error();
    e.message = "--config '" + r.config_path + "': " + e.message;
    return e;
  }
  // The record holds AdaRound's scales but not its learned rounding, so re-rounding the float
  // weight to nearest would export codes that differ from ptq's fake-quantized weights.
  if (const auto ada = session->ada_layers(); !ada.empty()) {
    return make_error(errc::onnx_unsupported,
                      "--config '" + r.config_path + "': layer '" + ada.front() +
                          "' is quantized by AdaRound (ada_quantize), whose learned rounding the "
                          "record does not hold; onnx-qdq would round its weights to nearest",
                      "export the ARQ layers only, or use the fake-quantized weights of "
                      "ptq calibrate --fake-quant-weights in the float model");
  }
  for (auto& p : plans) {
    const auto* l = session->find(p.manifest->desc.name);
    if (!l || !l->fused)
      continue;
    p.fused = true;
    p.weight.assign(l->desc.weight.begin(), l->desc.weight.end());
    p.bias.assign(l->desc.bias->begin(), l->desc.bias->end());
  }
  return {};
}

/// The output-channel index of each weight element, and the per-axis axis, in the ONNX layout.
struct weight_layout {
  std::vector<std::size_t> channel;  ///< per element of the manifest-layout weight
  std::size_t cout = 0;
  int axis = 0;
};

[[nodiscard]] ptq::result<weight_layout> layout_of(const ptq::manifest_layer& m,
                                                   const onnx::NodeProto& node) {
  weight_layout w;
  const auto& s = m.desc.weight.shape();
  const std::size_t n = m.desc.weight.size();
  w.channel.resize(n);
  using lt = ptq::layer_type;
  if (m.desc.type == lt::conv_transpose1d || m.desc.type == lt::conv_transpose2d) {
    // C × M/g × k…: axis 1 holds Cout only when group == 1 (spec §4.3).
    const std::size_t g = m.desc.conv.groups, per = n / (s[0] * s[1]);
    w.cout = s[1] * g;
    w.axis = 1;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t ci = i / (s[1] * per), j = (i / per) % s[1];
      w.channel[i] = (ci / (s[0] / g)) * s[1] + j;  // AMCT's Cout index gi·(M/g) + j
    }
    return w;
  }
  w.cout = s[0];
  const std::size_t per = n / s[0];
  for (std::size_t i = 0; i < n; ++i)
    w.channel[i] = i / per;
  // Conv M × C/g × k… and Gemm transB=1 N × K: axis 0; Gemm transB=0 and MatMul K × N: axis 1.
  w.axis = weight_is_k_by_n(node) ? 1 : 0;
  return w;
}

class exporter {
 public:
  exporter(const onnx_qdq_request& r, onnx::ModelProto& m) : req_(r), model_(m) {
    names_ = names_of(m.graph());
  }

  [[nodiscard]] ptq::result<onnx_qdq_layer_summary> apply(layer_plan& p) {
    auto& g = *model_.mutable_graph();
    auto& node = *g.mutable_node(p.node);
    const auto& m = *p.manifest;
    const auto& q = *p.q;
    const std::string& name = m.desc.name;
    onnx_qdq_layer_summary s;
    s.layer = name;
    s.node = node_label(node, p.node);
    s.fused = p.fused;
    if (p.fused) {
      if (auto st = fold_batch_norm(p); !st)
        return st.error();
    }
    if (m.desc.type != ptq::layer_type::avg_pool2d) {
      auto axis = quantize_weight(p);
      if (!axis)
        return axis.error();
      s.weight = m.weight_name;
      s.weight_axis = axis.value();
    }
    const auto& act = q.activation;
    if (act.bits != 8) {
      return make_error(errc::onnx_unsupported,
                        "layer '" + name + "': " + std::to_string(act.bits) +
                            "-bit activations need ONNX opset 21 (int4/int16 QDQ), which "
                            "this exporter does not write; it writes int8/uint8");
    }
    s.activation = node.input(0);
    std::string x = node.input(0);
    std::vector<onnx::NodeProto> before;
    if (!q.dmq_factors.empty()) {
      s.dmq = true;
      const auto& f = q.dmq_factors;
      std::vector<std::int64_t> dims = {static_cast<std::int64_t>(f.size())};
      if (m.desc.type != ptq::layer_type::linear) {  // [C, 1, …]: broadcast along axis 1
        for (std::size_t d = 2; d < m.desc.weight.dimension(); ++d)
          dims.push_back(1);
      }
      const std::string fname = names_.make(name + "_dmq_factors");
      *g.add_initializer() =
          make_tensor(fname, onnx::TensorProto::FLOAT, dims, f.data(), f.size() * sizeof(float));
      onnx::NodeProto div;
      div.set_op_type("Div");
      div.set_name(names_.make(name + "_dmq_Div"));
      div.add_input(x);
      div.add_input(fname);
      x = names_.make(name + "_input_balanced");
      div.add_output(x);
      before.push_back(std::move(div));
    }
    const float scale = act.scale;
    const std::string sname = names_.make(name + "_input_scale");
    const std::string zname = names_.make(name + "_input_zero_point");
    *g.add_initializer() = make_tensor(sname, onnx::TensorProto::FLOAT, {}, &scale, sizeof scale);
    if (act.dtype == ptq::qdq_dtype::uint8) {
      const auto z = static_cast<std::uint8_t>(act.zero_point);
      *g.add_initializer() = make_tensor(zname, onnx::TensorProto::UINT8, {}, &z, 1);
    } else {
      const auto z = static_cast<std::int8_t>(act.zero_point);
      *g.add_initializer() = make_tensor(zname, onnx::TensorProto::INT8, {}, &z, 1);
    }
    const std::string qn = names_.make(name + "_input_quantized");
    const std::string dq = names_.make(name + "_input_dequantized");
    before.push_back(qdq_node("QuantizeLinear", names_.make(name + "_input_QuantizeLinear"), x,
                              sname, zname, qn, std::nullopt));
    before.push_back(qdq_node("DequantizeLinear", names_.make(name + "_input_DequantizeLinear"), qn,
                              sname, zname, dq, std::nullopt));
    g.mutable_node(p.node)->set_input(0, dq);
    auto& list = inserted_[p.node];
    list.insert(list.end(), before.begin(), before.end());
    return s;
  }

  /// The graph with the inserted nodes before their consumers, removed nodes and unused
  /// initializers dropped.
  void finish() {
    auto& g = *model_.mutable_graph();
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (int i = 0; i < g.node_size(); ++i) {
      const auto it = inserted_.find(i);
      if (it != inserted_.end()) {
        for (auto& n : it->second)
          *nodes.Add() = std::move(n);
      }
      if (!removed_nodes_.count(i))
        *nodes.Add() = g.node(i);
    }
    g.mutable_node()->Swap(&nodes);
    std::set<std::string> used;
    for (const auto& n : g.node()) {
      for (const auto& i : n.input())
        used.insert(i);
    }
    for (const auto& o : g.output())
      used.insert(o.name());
    auto& inits = *g.mutable_initializer();
    for (int i = inits.size() - 1; i >= 0; --i) {
      if (dropped_.count(inits.Get(i).name()) && !used.count(inits.Get(i).name()))
        inits.DeleteSubrange(i, 1);
    }
    auto& inputs = *g.mutable_input();  // IR < 4 lists initializers as graph inputs too
    for (int i = inputs.size() - 1; i >= 0; --i) {
      if (dropped_.count(inputs.Get(i).name()) && !used.count(inputs.Get(i).name()))
        inputs.DeleteSubrange(i, 1);
    }
    auto& infos = *g.mutable_value_info();
    for (int i = infos.size() - 1; i >= 0; --i) {
      if (vanished_.count(infos.Get(i).name()))
        infos.DeleteSubrange(i, 1);
    }
  }

 private:
  static onnx::NodeProto qdq_node(const char* op, const std::string& name, const std::string& x,
                                  const std::string& scale, const std::string& zp,
                                  const std::string& y, std::optional<int> axis) {
    onnx::NodeProto n;
    n.set_op_type(op);
    n.set_name(name);
    n.add_input(x);
    n.add_input(scale);
    n.add_input(zp);
    n.add_output(y);
    if (axis) {
      auto* a = n.add_attribute();
      a->set_name("axis");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(*axis);
    }
    return n;
  }

  /// Conv → BatchNormalization becomes one Conv with the fused weight and bias.
  [[nodiscard]] ptq::result<> fold_batch_norm(layer_plan& p) {
    auto& g = *model_.mutable_graph();
    const auto users = consumers_of(g);
    const auto& m = *p.manifest;
    auto& conv = *g.mutable_node(p.node);
    const std::string at = "layer '" + m.desc.name + "': ";
    const std::string out = conv.output(0);
    const auto it = users.find(out);
    const bool graph_output = std::any_of(g.output().begin(), g.output().end(),
                                          [&](const auto& o) { return o.name() == out; });
    if (it == users.end() || it->second.size() != 1 || graph_output ||
        g.node(it->second.front().first).op_type() != "BatchNormalization" ||
        it->second.front().second != 0) {
      return make_error(errc::onnx_unsupported,
                        at + "calibration folded its BatchNorm, but the output '" + out +
                            "' of its node is not read by exactly one BatchNormalization");
    }
    const int bi = it->second.front().first;
    const auto& bn = g.node(bi);
    for (int k = 0; k < 4; ++k) {
      if (bn.input_size() <= k + 1 || bn.input(k + 1) != m.batch_norm_names[k]) {
        return make_error(errc::onnx_unsupported,
                          at + "the BatchNormalization '" + node_label(bn, bi) + "' reads '" +
                              (bn.input_size() > k + 1 ? bn.input(k + 1) : std::string()) +
                              "' where the manifest names '" + m.batch_norm_names[k] + "'");
      }
    }
    if (bn.output_size() != 1) {
      return make_error(errc::onnx_unsupported, at + "the BatchNormalization '" +
                                                    node_label(bn, bi) +
                                                    "' is in training mode (several outputs)");
    }
    for (int k = 1; k < 5; ++k)
      dropped_.insert(bn.input(k));
    vanished_.insert(out);
    const std::string bn_out = bn.output(0);
    removed_nodes_.insert(bi);
    conv.set_output(0, bn_out);
    const std::string bname = names_.make(m.desc.name + "_fused_bias");
    *g.add_initializer() =
        make_tensor(bname, onnx::TensorProto::FLOAT, {static_cast<std::int64_t>(p.bias.size())},
                    p.bias.data(), p.bias.size() * sizeof(float));
    if (conv.input_size() > 2) {
      dropped_.insert(conv.input(2));
      conv.set_input(2, bname);
    } else {
      conv.add_input(bname);
    }
    return {};
  }

  /// The weight as int8 codes and a DequantizeLinear; returns the axis (-1: per tensor).
  [[nodiscard]] ptq::result<int> quantize_weight(layer_plan& p) {
    auto& g = *model_.mutable_graph();
    auto& node = *g.mutable_node(p.node);
    const auto& m = *p.manifest;
    const auto& qw = *p.q->weight;
    const std::string at = "layer '" + m.desc.name + "': ";
    auto layout = layout_of(m, node);
    if (!layout)
      return layout.error();
    const auto& sw = qw.scales;
    if (sw.size() != 1 && sw.size() != layout->cout) {
      return make_error(errc::record_length_mismatch,
                        at + std::to_string(sw.size()) + " scale_w values for " +
                            std::to_string(layout->cout) + " output channels");
    }
    const bool per_channel = sw.size() > 1;
    const bool transpose = m.desc.type != ptq::layer_type::avg_pool2d && weight_is_k_by_n(node);
    if (per_channel && layout->axis == 1 && !transpose && m.desc.conv.groups > 1) {
      return make_error(errc::onnx_unsupported,
                        at + "a ConvTranspose with group " + std::to_string(m.desc.conv.groups) +
                            " and per-channel scale_w: its Cout is not one axis of the weight "
                            "(spec §4.3)");
    }
    std::vector<float> w = p.weight;
    std::vector<std::size_t> shape(m.desc.weight.shape().begin(), m.desc.weight.shape().end());
    if (!p.q->dmq_factors.empty()) {
      if (auto st = ptq::dmq_apply_to_weight(w.data(), shape, m.desc.type, m.desc.conv.groups,
                                             p.q->dmq_factors);
          !st) {
        return make_error(errc::onnx_unsupported, at + st.error().message);
      }
    }
    if (qw.dtype != ptq::qdq_dtype::int8) {
      return make_error(errc::onnx_unsupported,
                        at + std::to_string(qw.bits) +
                            "-bit weights do not fit the int8 container of a DequantizeLinear");
    }
    // 4/6/7-bit codes stay in their narrow range inside the int8 container: exact.
    ptq::kernels::quantizer qz;
    qz.qmin = static_cast<float>(qw.qmin);
    qz.qmax = static_cast<float>(qw.qmax);
    std::vector<std::int8_t> codes(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      qz.scale = sw[per_channel ? layout->channel[i] : 0];
      codes[i] = static_cast<std::int8_t>(ptq::kernels::quant_code(w[i], qz));
    }
    std::vector<std::int64_t> dims(shape.begin(), shape.end());
    if (transpose) {  // back to the model's K × N
      const std::size_t n = shape[0], k = shape[1];
      std::vector<std::int8_t> t(codes.size());
      for (std::size_t j = 0; j < n; ++j) {
        for (std::size_t i = 0; i < k; ++i)
          t[i * n + j] = codes[j * k + i];
      }
      codes.swap(t);
      dims = {static_cast<std::int64_t>(k), static_cast<std::int64_t>(n)};
    }
    const std::string base = m.weight_name;
    const std::string qname = names_.make(base + "_quantized");
    const std::string sname = names_.make(base + "_scale");
    const std::string zname = names_.make(base + "_zero_point");
    const std::string dq = names_.make(base + "_dequantized");
    *g.add_initializer() =
        make_tensor(qname, onnx::TensorProto::INT8, dims, codes.data(), codes.size());
    const std::vector<std::int8_t> zeros(sw.size(), 0);
    const std::vector<std::int64_t> sdims =
        per_channel ? std::vector<std::int64_t>{static_cast<std::int64_t>(sw.size())}
                    : std::vector<std::int64_t>{};
    *g.add_initializer() =
        make_tensor(sname, onnx::TensorProto::FLOAT, sdims, sw.data(), sw.size() * sizeof(float));
    *g.add_initializer() =
        make_tensor(zname, onnx::TensorProto::INT8, sdims, zeros.data(), zeros.size());
    const std::optional<int> axis = per_channel ? std::optional<int>(layout->axis) : std::nullopt;
    inserted_[p.node].push_back(qdq_node("DequantizeLinear",
                                         names_.make(base + "_DequantizeLinear"), qname, sname,
                                         zname, dq, axis));
    dropped_.insert(node.input(1));
    node.set_input(1, dq);
    return axis.value_or(-1);
  }

  const onnx_qdq_request& req_;
  onnx::ModelProto& model_;
  name_pool names_;
  std::map<int, std::vector<onnx::NodeProto>> inserted_;
  std::set<int> removed_nodes_;
  std::set<std::string> dropped_;   ///< initializers that may be unused now
  std::set<std::string> vanished_;  ///< tensors no node produces any more
};

/// onnx's checker and strict shape inference, as python3-onnx's check_model(full_check=True).
[[nodiscard]] ptq::result<> check_onnx(const onnx::ModelProto& m) {
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

struct matched_model {
  loaded_model model;
  parsed_inputs inputs;
  std::vector<layer_plan> plans;
};

[[nodiscard]] ptq::result<matched_model> load_and_match(const onnx_qdq_request& r,
                                                        bool record_layers) {
  auto loaded = load_model(r.onnx_path);
  if (!loaded)
    return loaded.error();
  matched_model mm;
  mm.model = std::move(loaded).value();
  const auto& g = mm.model.model.graph();
  onnx_weights weights;
  weights.graph = &g;
  weights.path = r.onnx_path;
  for (const auto& n : g.node()) {
    if (n.input_size() > 1 && weight_is_k_by_n(n))
      weights.transposed.insert(n.input(1));
  }
  if (record_layers) {
    auto in = read_inputs(r, weights);
    if (!in)
      return in.error();
    mm.inputs = std::move(in).value();
  } else {
    auto manifest = read_manifest(r, weights);
    if (!manifest)
      return manifest.error();
    mm.inputs.manifest = std::move(manifest).value();
  }
  const auto users = consumers_of(g);
  const auto find_layer = [&](const std::string& name) -> const ptq::manifest_layer* {
    for (const auto& l : mm.inputs.manifest.layers) {
      if (l.desc.name == name)
        return &l;
    }
    return nullptr;
  };
  const auto add = [&](const ptq::manifest_layer& l, const ptq::qdq_layer* q) -> ptq::result<> {
    auto node = match_node(g, users, l, r.onnx_path);
    if (!node)
      return node.error();
    layer_plan p;
    p.manifest = &l;
    p.q = q;
    p.node = node.value();
    mm.plans.push_back(std::move(p));
    return {};
  };
  if (record_layers) {
    for (const auto& q : mm.inputs.table.layers) {  // the manifest's order
      if (auto st = add(*find_layer(q.name), &q); !st)
        return st.error();
    }
  } else {
    for (const auto& l : mm.inputs.manifest.layers) {
      if (auto st = add(l, nullptr); !st)
        return st.error();
    }
  }
  return mm;
}

}  // namespace

bool onnx_available() noexcept {
  return true;
}

ptq::result<std::vector<onnx_qdq_layer_summary>> export_onnx_qdq(const onnx_qdq_request& r) {
  std::vector<named_path> inputs = {{"--onnx", r.onnx_path}, {"--record", r.record_path}};
  if (!r.manifest_path.empty())
    inputs.push_back({"--model", r.manifest_path});
  if (!r.config_path.empty())
    inputs.push_back({"--config", r.config_path});
  if (auto st = check_outputs({{"-o", r.output_path}}, inputs); !st)
    return st.error();
  auto matched = load_and_match(r, true);
  if (!matched)
    return matched.error();
  auto& mm = matched.value();
  if (auto st = plan_fusion(r, mm.inputs, mm.plans); !st)
    return st.error();
  exporter ex(r, mm.model.model);
  std::vector<onnx_qdq_layer_summary> out;
  for (auto& p : mm.plans) {
    auto s = ex.apply(p);
    if (!s)
      return s.error();
    out.push_back(std::move(s).value());
  }
  ex.finish();
  if (auto st = check_onnx(mm.model.model); !st)
    return st.error();
  // Serialized straight into the file (protobuf's buffered stream): no copy of the model's
  // bytes in memory. A message over 2 GiB does not serialize at all.
  if (mm.model.model.ByteSizeLong() > static_cast<std::size_t>(INT_MAX)) {
    return make_error(errc::write_failed, "-o '" + r.output_path +
                                              "': the model is over 2 GiB, which ONNX's protobuf "
                                              "cannot serialize (external data is not written)");
  }
  if (auto st = ptq::io::write_file_atomic_with(
          r.output_path, [&](int fd) { return mm.model.model.SerializeToFileDescriptor(fd); });
      !st) {
    return st.error();
  }
  return out;
}

ptq::result<std::vector<onnx_layer_names>> onnx_names(const std::string& onnx_path,
                                                      const std::string& manifest_path) {
  onnx_qdq_request r;
  r.onnx_path = onnx_path;
  r.manifest_path = manifest_path;
  auto matched = load_and_match(r, false);
  if (!matched)
    return matched.error();
  const auto& g = matched->model.model.graph();
  std::vector<onnx_layer_names> out;
  for (const auto& p : matched->plans) {
    const auto& n = g.node(p.node);
    onnx_layer_names names;
    names.layer = p.manifest->desc.name;
    names.node = node_label(n, p.node);
    names.activation = n.input(0);
    if (p.manifest->desc.type != ptq::layer_type::avg_pool2d)
      names.weight = n.input(1);
    out.push_back(std::move(names));
  }
  return out;
}

}  // namespace ptq_cli

#else  // PTQ_WITH_ONNX

namespace ptq_cli {
namespace {

[[nodiscard]] ptq::error unavailable() {
  return ptq::make_error(ptq::errc::onnx_unavailable,
                         "this ptq was built without ONNX (PTQ_WITH_ONNX=OFF), so it cannot "
                         "read or write ONNX models",
                         "install libonnx-dev and rebuild (cmake -DPTQ_WITH_ONNX=ON)");
}

}  // namespace

bool onnx_available() noexcept {
  return false;
}

ptq::result<std::vector<onnx_qdq_layer_summary>> export_onnx_qdq(const onnx_qdq_request&) {
  return unavailable();
}

ptq::result<std::vector<onnx_layer_names>> onnx_names(const std::string&, const std::string&) {
  return unavailable();
}

}  // namespace ptq_cli

#endif  // PTQ_WITH_ONNX
