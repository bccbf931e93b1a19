// The JSON field readers of a model manifest entry (session/model_manifest.hpp): sizes, the
// tensors a field names in the weights file, optional scalars, unknown keys (with the nearest
// known one), and the checks of a convolution attribute. Every error is E804.
// Depends on: core, detail and nlohmann_json.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"
#include "ptq/core/layer_type.hpp"
#include "ptq/detail/suggest.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

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

[[nodiscard]] inline error manifest_error(std::string message, std::string note = {}) {
  return make_error(errc::manifest_invalid, std::move(message), std::move(note));
}

/// `e[key]`, a string naming a tensor of `weights`, read as float32 into `values` (its shape
/// into `shape`).
template <class Weights>
[[nodiscard]] result<> tensor_field(const nlohmann::json& e, const char* key,
                                    const Weights& weights, const std::string& at,
                                    std::vector<std::size_t>& shape, std::vector<float>& values,
                                    std::string& name) {
  if (!e.contains(key) || !e[key].is_string())
    return manifest_error(at + "\"" + key + "\" must name a tensor of the weights file");
  name = e[key].template get<std::string>();
  auto t = weights.get(name);
  if (!t)
    return manifest_error(at + "\"" + key + "\": " + t.error().message);
  shape = t->shape;
  values.assign(t->data.begin(), t->data.end());
  return {};
}

template <class Weights>
[[nodiscard]] result<> vector_field(const nlohmann::json& e, const char* key,
                                    const Weights& weights, const std::string& at,
                                    std::vector<float>& out, std::string& name) {
  std::vector<std::size_t> shape;
  return tensor_field(e, key, weights, at, shape, out, name);
}

/// An optional key of type `T` (bool, float or std::string): `fallback` when absent, false when
/// present with another type (nlohmann's `value()` would throw instead).
template <class T>
[[nodiscard]] bool optional_field(const nlohmann::json& e, const char* key, T fallback, T& out) {
  out = std::move(fallback);
  if (!e.contains(key))
    return true;
  const auto& v = e[key];
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean())
      return false;
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string())
      return false;
  } else {
    if (!v.is_number())
      return false;
  }
  out = v.template get<T>();
  return true;
}

/// E804 for the first key of `e` that is not in `known`: a typo ("batchnorm") would otherwise
/// be ignored and change the calibration with no word.
[[nodiscard]] inline result<> known_keys(const nlohmann::json& e,
                                         const std::vector<std::string_view>& known,
                                         const std::string& at) {
  for (const auto& [key, value] : e.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return manifest_error(at + "unknown key \"" + key + "\"", suggest(key, known));
    }
  }
  return {};
}

/// The spatial rank of a conv layer (Conv1d 1, Conv2d 2, Conv3d 3, ...).
[[nodiscard]] inline std::size_t spatial_rank(layer_type t) noexcept {
  switch (t) {
    case layer_type::conv1d:
    case layer_type::conv_transpose1d:
      return 1;
    case layer_type::conv3d:
      return 3;
    default:
      return 2;
  }
}

/// A conv attribute: 1 value or one per spatial dimension, each in [lowest, 2^20].
[[nodiscard]] inline result<> check_attribute(const std::vector<std::size_t>& v,
                                              std::string_view key, std::size_t lowest,
                                              std::size_t rank, const std::string& at) {
  constexpr std::size_t largest = std::size_t{1} << 20;
  if (v.size() != 1 && v.size() != rank) {
    return manifest_error(at + "\"" + std::string(key) + "\" has " + std::to_string(v.size()) +
                          " values; the layer has " + std::to_string(rank) +
                          " spatial dimension(s) (give 1 or " + std::to_string(rank) + ")");
  }
  for (const auto x : v) {
    if (x < lowest || x > largest) {
      return manifest_error(at + "\"" + std::string(key) + "\" value " + std::to_string(x) +
                            " is outside [" + std::to_string(lowest) + ", " +
                            std::to_string(largest) + "]");
    }
  }
  return {};
}

}  // namespace detail

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
