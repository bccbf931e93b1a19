// The model manifest of `ptq calibrate --model` (docs/calibrate.md): a JSON list of the
// quantizable layers in order, whose tensor fields name tensors of a safetensors weights file.
// Produces the session's layer descriptions. Adds nlohmann_json.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ptq/core/abi.hpp"
#include "ptq/io/safetensors.hpp"
#include "ptq/session/layer.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace io {

/// One manifest entry: the session's description plus what an engine needs to run it and what
/// a writer needs to put tensors back under their names.
struct manifest_layer {
  layer_desc desc;
  std::string weight_name;  ///< tensor names in the weights file ("" when absent)
  std::string bias_name;
  std::vector<std::string> batch_norm_names;  ///< weight, bias, running_mean, running_var
  std::vector<std::size_t> kernel_size;       ///< AvgPool2d
  std::vector<std::size_t> pool_stride;       ///< AvgPool2d (default: kernel_size)
  bool flatten = false;                       ///< Linear: flatten the input first
};

struct model_manifest {
  std::vector<manifest_layer> layers;
  std::vector<std::size_t> input_shape;  ///< one sample, e.g. [1, 8, 8] (optional)
};

namespace detail {

inline bool size_list(const nlohmann::json& j, std::vector<std::size_t>& out) {
  if (j.is_number_unsigned()) {
    out = {j.get<std::size_t>()};
    return true;
  }
  if (!j.is_array())
    return false;
  out.clear();
  for (const auto& v : j) {
    if (!v.is_number_unsigned())
      return false;
    out.push_back(v.get<std::size_t>());
  }
  return true;
}

inline bool tensor_field(const nlohmann::json& e, const char* key, const safetensors_file& w,
                         const std::string& at, xt::xarray<float>& out, std::string& name,
                         std::string& error) {
  if (!e[key].is_string()) {
    error = at + "\"" + key + "\" must name a tensor of the weights file";
    return false;
  }
  name = e[key].get<std::string>();
  float_tensor t;
  if (!w.get(name, t, error)) {
    error = at + "\"" + key + "\": " + error;
    return false;
  }
  out = xt::xarray<float>::from_shape(t.shape);
  std::copy(t.data.begin(), t.data.end(), out.begin());
  return true;
}

inline bool vector_field(const nlohmann::json& e, const char* key, const safetensors_file& w,
                         const std::string& at, std::vector<float>& out, std::string& name,
                         std::string& error) {
  xt::xarray<float> t;
  if (!tensor_field(e, key, w, at, t, name, error))
    return false;
  out.assign(t.begin(), t.end());
  return true;
}

}  // namespace detail

/// Reads a manifest and the tensors it names. Errors name the entry and the key: a missing or
/// malformed key, an unknown layer type or activation, a tensor missing from the weights file.
[[nodiscard]] inline bool parse_manifest(std::string_view text, const safetensors_file& weights,
                                         model_manifest& out, std::string& error) {
  const auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("layers") || !j["layers"].is_array()) {
    error = "the manifest must be a JSON object with a \"layers\" list";
    return false;
  }
  out = model_manifest{};
  if (j.contains("input_shape") && !detail::size_list(j["input_shape"], out.input_shape)) {
    error = "\"input_shape\" must be a list of sizes";
    return false;
  }
  for (std::size_t i = 0; i < j["layers"].size(); ++i) {
    const auto& e = j["layers"][i];
    std::string at = "layer " + std::to_string(i) + ": ";
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) {
      error = at + "needs a string \"name\"";
      return false;
    }
    manifest_layer m;
    m.desc.name = e["name"].get<std::string>();
    at = "layer '" + m.desc.name + "': ";
    if (!e.contains("type") || !e["type"].is_string()) {
      error = at + "needs a string \"type\"";
      return false;
    }
    const auto type = layer_type_from_string(e["type"].get<std::string>());
    if (!type) {
      error = at + "type \"" + e["type"].get<std::string>() +
              "\" is not one ptq calibrates (Conv1d, Conv2d, Conv3d, ConvTranspose1d, "
              "ConvTranspose2d, Linear, AvgPool2d)";
      return false;
    }
    m.desc.type = *type;
    if (m.desc.type == layer_type::avg_pool2d) {
      if (!e.contains("kernel_size") || !detail::size_list(e["kernel_size"], m.kernel_size)) {
        error = at + "AvgPool2d needs \"kernel_size\"";
        return false;
      }
      if (m.kernel_size.size() == 1)
        m.kernel_size.push_back(m.kernel_size[0]);
      m.pool_stride = m.kernel_size;
      if (e.contains("stride") && !detail::size_list(e["stride"], m.pool_stride)) {
        error = at + "\"stride\" must be a list of sizes";
        return false;
      }
      if (m.pool_stride.size() == 1)
        m.pool_stride.push_back(m.pool_stride[0]);
      out.layers.push_back(std::move(m));
      continue;
    }
    if (!e.contains("weight")) {
      error = at + "needs \"weight\"";
      return false;
    }
    if (!detail::tensor_field(e, "weight", weights, at, m.desc.weight, m.weight_name, error)) {
      return false;
    }
    if (e.contains("bias")) {
      xt::xarray<float> b;
      if (!detail::tensor_field(e, "bias", weights, at, b, m.bias_name, error))
        return false;
      m.desc.bias = std::move(b);
    }
    auto& conv = m.desc.conv;
    for (const auto* key : {"stride", "padding", "dilation", "output_padding"}) {
      if (!e.contains(key))
        continue;
      const std::string k = key;
      auto& dst = k == "stride"     ? conv.stride
                  : k == "padding"  ? conv.padding
                  : k == "dilation" ? conv.dilation
                                    : conv.output_padding;
      if (!detail::size_list(e[key], dst)) {
        error = at + "\"" + key + "\" must be a list of sizes";
        return false;
      }
    }
    if (e.contains("groups")) {
      if (!e["groups"].is_number_unsigned() || e["groups"].get<std::size_t>() == 0) {
        error = at + "\"groups\" must be a positive integer";
        return false;
      }
      conv.groups = e["groups"].get<std::size_t>();
    }
    if (e.contains("padding_mode")) {
      if (!e["padding_mode"].is_string()) {
        error = at + "\"padding_mode\" must be a string";
        return false;
      }
      conv.padding_mode = e["padding_mode"].get<std::string>();
    }
    m.flatten = e.value("flatten", false);
    if (e.contains("batch_norm")) {
      const auto& bn = e["batch_norm"];
      if (!bn.is_object()) {
        error = at + "\"batch_norm\" must be an object";
        return false;
      }
      batch_norm_params p;
      m.batch_norm_names.resize(4);
      const char* keys[] = {"weight", "bias", "running_mean", "running_var"};
      std::vector<float>* dst[] = {&p.weight, &p.bias, &p.running_mean, &p.running_var};
      for (int k = 0; k < 4; ++k) {
        if (!detail::vector_field(bn, keys[k], weights, at + "batch_norm: ", *dst[k],
                                  m.batch_norm_names[static_cast<std::size_t>(k)], error)) {
          return false;
        }
      }
      if (bn.contains("eps")) {
        if (!bn["eps"].is_number()) {
          error = at + "batch_norm: \"eps\" must be a number";
          return false;
        }
        p.eps = bn["eps"].get<float>();
      }
      m.desc.batch_norm = std::move(p);
    }
    if (e.contains("activation")) {
      const auto& a = e["activation"];
      const std::string kind = a.is_string() ? a.get<std::string>()
                               : a.is_object() && a.contains("type") && a["type"].is_string()
                                   ? a["type"].get<std::string>()
                                   : "";
      auto& d = m.desc.activation;
      const nlohmann::json attrs = a.is_object() ? a : nlohmann::json::object();
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
        d.negative_slope = attrs.value("negative_slope", 0.01f);
      } else if (kind == "PReLU") {
        d.kind = activation_kind::prelu;
        std::string name;
        if (!detail::vector_field(attrs, "weight", weights, at + "PReLU: ", d.prelu_weight, name,
                                  error)) {
          return false;
        }
      } else if (kind == "GELU") {
        d.kind = activation_kind::gelu;
        const std::string approx = attrs.value("approximate", std::string("none"));
        if (approx != "none" && approx != "tanh") {
          error = at + "GELU \"approximate\" must be \"none\" or \"tanh\"";
          return false;
        }
        d.gelu_tanh = approx == "tanh";
      } else if (kind == "RReLU") {
        d.kind = activation_kind::rrelu;
        d.rrelu_lower = attrs.value("lower", 1.0f / 8.0f);
        d.rrelu_upper = attrs.value("upper", 1.0f / 3.0f);
      } else {
        error = at +
                "activation must be one of ReLU, ReLU6, Sigmoid, Tanh, LeakyReLU, PReLU, "
                "GELU, RReLU";
        return false;
      }
    }
    out.layers.push_back(std::move(m));
  }
  return true;
}

}  // namespace io
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
