// The model manifest of `ptq calibrate --model` (docs/calibrate.md): a JSON list of the
// quantizable layers in order, whose tensor fields name tensors of a safetensors weights file.
// Produces the session's layer descriptions. It sits with the session, not in io/: it describes
// layers, and io/ reads files without knowing what a layer is. The tensors come from any
// weights source whose `get(name)` returns a `result<T>` with `shape` and `data` (such as
// io::safetensors_file), so this header needs no io header.
// Depends on: core, detail and nlohmann_json.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ptq/core/error.hpp"
#include "ptq/detail/json_parse.hpp"
#include "ptq/session/layer.hpp"
#include "ptq/session/manifest_fields.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// One manifest entry: the session's description plus what an engine needs to run it and what
/// a writer needs to put tensors back under their names. `desc`'s weight and bias views point
/// at `weight_values` and `bias_values`, which copies of the entry share.
struct manifest_layer {
  layer_desc desc;
  /// The weights file's tensors as float32 in C order (set_weight, set_bias). Shared by copies
  /// of the entry; a session may quantize weight_values where they lie (layer_desc::weight_out)
  /// when nothing else reads them.
  std::shared_ptr<std::vector<float>> weight_values, bias_values;
  std::string weight_name;  ///< tensor names in the weights file ("" when absent)
  std::string bias_name;
  std::vector<std::string> batch_norm_names;  ///< weight, bias, running_mean, running_var
  std::vector<std::size_t> kernel_size;       ///< AvgPool2d
  std::vector<std::size_t> pool_stride;       ///< AvgPool2d (default: kernel_size)
  bool flatten = false;                       ///< Linear: flatten the input first

  /// The layer's weight: `values` (float32, C order) of `shape`, held here, desc.weight a view
  /// of them.
  void set_weight(std::vector<std::size_t> shape, std::vector<float> values) {
    auto held = std::make_shared<std::vector<float>>(std::move(values));
    desc.weight = view_of(held->data(), std::move(shape), desc.name + ".weight");
    weight_values = std::move(held);
  }
  /// The layer's bias, held here, desc.bias a view of it.
  void set_bias(std::vector<float> values) {
    auto held = std::make_shared<std::vector<float>>(std::move(values));
    desc.bias = view_of(held->data(), {held->size()}, desc.name + ".bias");
    bias_values = std::move(held);
  }
};

struct model_manifest {
  std::vector<manifest_layer> layers;
  std::vector<std::size_t> input_shape;  ///< one sample, e.g. [1, 8, 8] (optional)
};

namespace detail {

/// The keys a manifest entry of type `t` may have.
[[nodiscard]] inline std::vector<std::string_view> entry_keys(layer_type t) {
  std::vector<std::string_view> known = {"name", "type"};
  if (t == layer_type::avg_pool2d) {
    known.insert(known.end(), {"kernel_size", "stride"});
    return known;
  }
  known.insert(known.end(), {"weight", "bias", "batch_norm", "activation"});
  if (t == layer_type::linear) {
    known.emplace_back("flatten");
  } else {
    known.insert(known.end(), {"stride", "padding", "dilation", "groups", "padding_mode"});
  }
  if (is_conv_transpose(t))
    known.emplace_back("output_padding");
  return known;
}

/// An AvgPool2d entry's kernel_size and stride (the stride defaults to the kernel size).
[[nodiscard]] inline result<> read_pool_fields(const nlohmann::json& e, const std::string& at,
                                               manifest_layer& m) {
  if (!e.contains("kernel_size") || !size_list(e["kernel_size"], m.kernel_size))
    return manifest_error(at + "AvgPool2d needs \"kernel_size\"");
  if (m.kernel_size.size() == 1)
    m.kernel_size.push_back(m.kernel_size[0]);
  m.pool_stride = m.kernel_size;
  if (e.contains("stride") && !size_list(e["stride"], m.pool_stride))
    return manifest_error(at + "\"stride\" must be a list of sizes");
  if (m.pool_stride.size() == 1)
    m.pool_stride.push_back(m.pool_stride[0]);
  for (const auto& [key, v] :
       {std::pair{"kernel_size", &m.kernel_size}, std::pair{"stride", &m.pool_stride}}) {
    if (auto st = check_attribute(*v, key, 1, 2, at); !st)
      return st;
  }
  return {};
}

/// A conv or Linear entry's convolution attributes, groups, padding_mode and flatten.
[[nodiscard]] inline result<> read_conv_attributes(const nlohmann::json& e, const std::string& at,
                                                   manifest_layer& m) {
  auto& conv = m.desc.conv;
  for (const auto* key : {"stride", "padding", "dilation", "output_padding"}) {
    if (!e.contains(key))
      continue;
    const std::string k = key;
    auto& dst = k == "stride"     ? conv.stride
                : k == "padding"  ? conv.padding
                : k == "dilation" ? conv.dilation
                                  : conv.output_padding;
    if (!size_list(e[key], dst))
      return manifest_error(at + "\"" + key + "\" must be a list of sizes");
    const std::size_t lowest = k == "stride" || k == "dilation" ? 1 : 0;
    if (auto st = check_attribute(dst, key, lowest, spatial_rank(m.desc.type), at); !st)
      return st;
  }
  if (e.contains("groups")) {
    if (!e["groups"].is_number_unsigned() || e["groups"].get<std::size_t>() == 0)
      return manifest_error(at + "\"groups\" must be a positive integer");
    conv.groups = e["groups"].get<std::size_t>();
  }
  if (e.contains("padding_mode")) {
    if (!e["padding_mode"].is_string())
      return manifest_error(at + "\"padding_mode\" must be a string");
    conv.padding_mode = e["padding_mode"].get<std::string>();
  }
  if (!optional_field(e, "flatten", false, m.flatten))
    return manifest_error(at + "\"flatten\" must be true or false");
  return {};
}

/// An entry's "batch_norm" object: its four tensors and eps.
template <class Weights>
[[nodiscard]] result<> read_batch_norm(const nlohmann::json& bn, const Weights& weights,
                                       const std::string& at, manifest_layer& m) {
  if (!bn.is_object())
    return manifest_error(at + "\"batch_norm\" must be an object");
  if (auto st = known_keys(bn, {"weight", "bias", "running_mean", "running_var", "eps"},
                           at + "batch_norm: ");
      !st)
    return st;
  batch_norm_params p;
  m.batch_norm_names.resize(4);
  const char* keys[] = {"weight", "bias", "running_mean", "running_var"};
  std::vector<float>* dst[] = {&p.weight, &p.bias, &p.running_mean, &p.running_var};
  for (int k = 0; k < 4; ++k) {
    if (auto r = vector_field(bn, keys[k], weights, at + "batch_norm: ", *dst[k],
                              m.batch_norm_names[static_cast<std::size_t>(k)]);
        !r) {
      return r.error();
    }
  }
  if (bn.contains("eps")) {
    if (!bn["eps"].is_number())
      return manifest_error(at + "batch_norm: \"eps\" must be a number");
    p.eps = bn["eps"].get<float>();
  }
  m.desc.batch_norm = std::move(p);
  return {};
}

/// An entry's "activation": a type name, or an object with "type" and its attributes.
template <class Weights>
[[nodiscard]] result<> read_activation(const nlohmann::json& a, const Weights& weights,
                                       const std::string& at, activation_desc& d) {
  const std::string kind = a.is_string() ? a.get<std::string>()
                           : a.is_object() && a.contains("type") && a["type"].is_string()
                               ? a["type"].get<std::string>()
                               : "";
  const nlohmann::json attrs = a.is_object() ? a : nlohmann::json::object();
  const std::vector<std::string_view> attr_keys =
      kind == "LeakyReLU" ? std::vector<std::string_view>{"type", "negative_slope"}
      : kind == "PReLU"   ? std::vector<std::string_view>{"type", "weight"}
      : kind == "GELU"    ? std::vector<std::string_view>{"type", "approximate"}
      : kind == "RReLU"   ? std::vector<std::string_view>{"type", "lower", "upper"}
                          : std::vector<std::string_view>{"type"};
  if (auto st = known_keys(attrs, attr_keys, at + "activation: "); !st)
    return st.error();
  if (kind == "ReLU") {
    d.kind = activation_kind::relu;
  } else if (kind == "ReLU6") {
    d.kind = activation_kind::relu6;
  } else if (kind == "Sigmoid") {
    d.kind = activation_kind::sigmoid;
  } else if (kind == "Tanh") {
    d.kind = activation_kind::tanh;
  } else if (kind == "LeakyReLU") {
    d.kind = activation_kind::leaky_relu;
    if (!optional_field(attrs, "negative_slope", 0.01f, d.negative_slope))
      return manifest_error(at + "LeakyReLU \"negative_slope\" must be a number");
  } else if (kind == "PReLU") {
    d.kind = activation_kind::prelu;
    std::string name;
    if (auto r = vector_field(attrs, "weight", weights, at + "PReLU: ", d.prelu_weight, name); !r) {
      return r.error();
    }
  } else if (kind == "GELU") {
    d.kind = activation_kind::gelu;
    std::string approx;
    if (!optional_field(attrs, "approximate", std::string("none"), approx) ||
        (approx != "none" && approx != "tanh")) {
      return manifest_error(at + R"(GELU "approximate" must be "none" or "tanh")");
    }
    d.gelu_tanh = approx == "tanh";
  } else if (kind == "RReLU") {
    d.kind = activation_kind::rrelu;
    if (!optional_field(attrs, "lower", 1.0f / 8.0f, d.rrelu_lower) ||
        !optional_field(attrs, "upper", 1.0f / 3.0f, d.rrelu_upper)) {
      return manifest_error(at + R"(RReLU "lower" and "upper" must be numbers)");
    }
  } else {
    return manifest_error(at +
                          "activation must be one of ReLU, ReLU6, Sigmoid, Tanh, LeakyReLU, PReLU, "
                          "GELU, RReLU");
  }
  return {};
}

/// Entry `i` (counted from 0) of the "layers" list.
template <class Weights>
[[nodiscard]] result<manifest_layer> read_entry(const nlohmann::json& e, std::size_t i,
                                                const Weights& weights) {
  std::string at = "layer " + std::to_string(i + 1) + ": ";  // counted from 1
  if (!e.is_object() || !e.contains("name") || !e["name"].is_string())
    return manifest_error(at + "needs a string \"name\"");
  manifest_layer m;
  m.desc.name = e["name"].get<std::string>();
  at = "layer '" + m.desc.name + "': ";
  if (!e.contains("type") || !e["type"].is_string())
    return manifest_error(at + "needs a string \"type\"");
  const auto type = layer_type_from_string(e["type"].get<std::string>());
  if (!type) {
    return manifest_error(at + "type \"" + e["type"].get<std::string>() +
                          "\" is not one ptq calibrates (Conv1d, Conv2d, Conv3d, ConvTranspose1d, "
                          "ConvTranspose2d, Linear, AvgPool2d)");
  }
  m.desc.type = *type;
  if (auto st = known_keys(e, entry_keys(m.desc.type), at); !st)
    return st.error();
  if (m.desc.type == layer_type::avg_pool2d) {
    if (auto st = read_pool_fields(e, at, m); !st)
      return st.error();
    return m;
  }
  if (!e.contains("weight"))
    return manifest_error(at + "needs \"weight\"");
  std::vector<std::size_t> shape;
  std::vector<float> values;
  if (auto r = tensor_field(e, "weight", weights, at, shape, values, m.weight_name); !r)
    return r.error();
  m.set_weight(std::move(shape), std::move(values));
  if (e.contains("bias")) {
    std::vector<float> bias;
    if (auto r = vector_field(e, "bias", weights, at, bias, m.bias_name); !r)
      return r.error();
    m.set_bias(std::move(bias));
  }
  if (auto st = read_conv_attributes(e, at, m); !st)
    return st.error();
  if (e.contains("batch_norm")) {
    if (auto st = read_batch_norm(e["batch_norm"], weights, at, m); !st)
      return st.error();
  }
  if (e.contains("activation")) {
    if (auto st = read_activation(e["activation"], weights, at, m.desc.activation); !st)
      return st.error();
  }
  return m;
}

}  // namespace detail

/// Reads a manifest and the tensors it names. Errors (E804) name the entry and the key: a missing,
/// malformed or unknown key (with the nearest known one), a conv attribute out of range (stride
/// and dilation at least 1; every value at most 2^20; 1 value or one per spatial dimension), an
/// unknown layer type or activation, a tensor missing from the weights file.
template <class Weights>
[[nodiscard]] result<model_manifest> try_parse_manifest(std::string_view text,
                                                        const Weights& weights) {
  using detail::manifest_error;
  const auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) {
    const auto where = detail::parse_json_ordered(text);
    return manifest_error("the manifest is not valid JSON at " + std::to_string(where.line) + ":" +
                          std::to_string(where.column) + ": " + where.what);
  }
  if (j.is_object()) {
    if (auto st = detail::known_keys(j, {"layers", "input_shape", "metadata"}, "the manifest: ");
        !st)
      return st.error();
  }
  if (!j.is_object() || !j.contains("layers") || !j["layers"].is_array())
    return manifest_error("the manifest must be a JSON object with a \"layers\" list");
  model_manifest out;
  if (j.contains("input_shape") && !detail::size_list(j["input_shape"], out.input_shape))
    return manifest_error("\"input_shape\" must be a list of sizes");
  for (std::size_t i = 0; i < j["layers"].size(); ++i) {
    auto m = detail::read_entry(j["layers"][i], i, weights);
    if (!m)
      return m.error();
    out.layers.push_back(std::move(m).value());
  }
  return out;
}

#if PTQ_EXCEPTIONS
/// try_parse_manifest, throwing ptq::exception on an error.
template <class Weights>
[[nodiscard]] model_manifest parse_manifest(std::string_view text, const Weights& weights) {
  return value_or_throw(try_parse_manifest(text, weights));
}
#endif

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
