// Reading a model's layer list, the JSON that names the layers a config is resolved against
// (`ptq resolve --layers`), with nlohmann_json. Never throws.
// Depends on: core, detail and nlohmann_json.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ptq/config/plan.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"
#include "ptq/detail/json_parse.hpp"
#include "ptq/detail/suggest.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Reads a layer list `[{"name": "conv1", "type": "Conv2d", "bias": true, "in_channels": 16,
/// "groups": 1}, ...]`; `bias`, `in_channels` and `groups` are optional. Never throws.
[[nodiscard]] inline result<std::vector<layer_info>> try_read_layer_list(std::string_view text) {
  using R = result<std::vector<layer_info>>;
  auto fail = [](std::string message, std::string note = {}) {
    return R(std::vector<error>{
        {errc::bad_layer_list, severity::error, std::move(message), {}, std::move(note)}});
  };
  const auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) {
    const auto where = detail::parse_json_ordered(text);
    return fail("the layer list is not valid JSON at " + std::to_string(where.line) + ":" +
                std::to_string(where.column) + ": " + where.what);
  }
  if (!j.is_array())
    return fail(R"(the layer list must be a JSON array of {"name", "type"} objects)");
  std::vector<layer_info> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    const std::string at = "layer list entry " + std::to_string(i + 1);  // counted from 1
    if (!e.is_object())
      return fail(at + " is not an object");
    static const std::vector<std::string_view> known = {"name", "type", "bias", "in_channels",
                                                        "groups"};
    for (const auto& [key, v] : e.items()) {
      if (std::find(known.begin(), known.end(), key) == known.end())
        return fail(at + " has unknown key '" + key + "'", detail::suggest(key, known));
    }
    layer_info l;
    if (!e.contains("name") || !e["name"].is_string())
      return fail(at + " needs a string \"name\"");
    l.name = e["name"].template get<std::string>();
    if (!e.contains("type") || !e["type"].is_string())
      return fail(at + " ('" + l.name + "') needs a string \"type\"");
    const auto type_name = e["type"].template get<std::string>();
    const auto type = layer_type_from_string(type_name);
    if (!type) {
      std::string valid;
      for (const auto t : all_layer_types)
        valid += (valid.empty() ? "" : ", ") + std::string(to_string(t));
      return fail(at + " ('" + l.name + "') has type '" + type_name +
                  "', which ptq does not calibrate; valid types: " + valid);
    }
    l.type = *type;
    if (e.contains("bias")) {
      if (!e["bias"].is_boolean())
        return fail(at + " ('" + l.name + "'): \"bias\" must be true or false");
      l.has_bias = e["bias"].template get<bool>();
    }
    auto positive = [&](const char* key, std::uint32_t& dst) {
      const auto& v = e[key];
      if (!v.is_number_integer() || v.template get<long long>() < 1 ||
          v.template get<long long>() > 0xFFFFFFFFLL)
        return false;
      dst = static_cast<std::uint32_t>(v.template get<long long>());
      return true;
    };
    if (e.contains("in_channels")) {
      std::uint32_t c = 0;
      if (!positive("in_channels", c))
        return fail(at + " ('" + l.name + "'): \"in_channels\" must be a positive integer");
      l.in_channels = c;
    }
    if (e.contains("groups") && !positive("groups", l.groups)) {
      return fail(at + " ('" + l.name + "'): \"groups\" must be a positive integer");
    }
    out.push_back(std::move(l));
  }
  return {std::move(out)};
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
