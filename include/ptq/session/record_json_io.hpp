// The record as JSON: {"<layer>": {"scale_d": ..., "offset_d": ..., "scale_w": [...], ...}}, in
// the record's order, with the same fields and checks as the proto-text form.
// Depends on: core, detail and nlohmann_json.
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ptq/core/abi.hpp"
#include "ptq/detail/json_parse.hpp"
#include "ptq/session/record.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

inline void to_json(nlohmann::ordered_json& j, const layer_record& r) {
  j = nlohmann::ordered_json::object();
  auto f = [](float v) { return nlohmann::ordered_json(detail::toolkit_double(v)); };
  if (r.scale_d)
    j["scale_d"] = f(*r.scale_d);
  if (r.offset_d)
    j["offset_d"] = *r.offset_d;
  if (!r.scale_w.empty() || !r.offset_w.empty()) {
    auto& s = j["scale_w"];
    s = nlohmann::ordered_json::array();
    for (const float v : r.scale_w)
      s.push_back(f(v));
    j["offset_w"] = r.offset_w;
  }
  if (!r.shift_bit.empty())
    j["shift_bit"] = r.shift_bit;
  if (!r.tensor_balance_factor.empty()) {
    auto& t = j["tensor_balance_factor"];
    t = nlohmann::ordered_json::array();
    for (const float v : r.tensor_balance_factor)
      t.push_back(f(v));
  }
  if (r.skip_fusion)
    j["skip_fusion"] = *r.skip_fusion;
  if (r.dst_type)
    j["dst_type"] = *r.dst_type;
  if (r.act_type)
    j["act_type"] = *r.act_type;
  if (r.wts_type)
    j["wts_type"] = *r.wts_type;
  if (r.fakequant_precision_mode)
    j["fakequant_precision_mode"] = *r.fakequant_precision_mode;
}

inline void to_json(nlohmann::ordered_json& j, const record_file& rec) {
  j = nlohmann::ordered_json::object();
  std::unordered_set<std::string_view> keys;  // a repeated key replaces the entry, as before
  for (const auto& e : rec.records) {
    if (keys.insert(e.key).second) {
      detail::append_member(j, e.key, e.value);
    } else {
      j[e.key] = e.value;
    }
  }
}

namespace detail {

[[nodiscard]] inline error record_value_error(std::string message) {
  return make_error(errc::record_value_invalid, std::move(message));
}

/// A JSON number (not a boolean) as float; `at` names the field in the error.
[[nodiscard]] inline result<float> json_number(const nlohmann::ordered_json& v,
                                               const std::string& at) {
  if (!v.is_number() || v.is_boolean())
    return record_value_error(at + " must be a number");
  return static_cast<float>(v.get<double>());
}

/// A JSON integer in [lo, hi].
[[nodiscard]] inline result<long long> json_integer(const nlohmann::ordered_json& v,
                                                    const std::string& at, long long lo,
                                                    long long hi) {
  // An unsigned value above LLONG_MAX would wrap in get<long long>(), so it is compared as is.
  const bool fits =
      v.is_number_unsigned()
          ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(hi)
          : v.is_number_integer() && v.get<long long>() >= lo && v.get<long long>() <= hi;
  if (!fits) {
    return record_value_error(at + " must be an integer in [" + std::to_string(lo) + ", " +
                              std::to_string(hi) + "]");
  }
  return v.get<long long>();
}

/// A JSON string into `dst`.
[[nodiscard]] inline result<> json_text(const nlohmann::ordered_json& v, const std::string& at,
                                        std::optional<std::string>& dst) {
  if (!v.is_string())
    return record_value_error(at + " must be a string");
  dst = v.get<std::string>();
  return {};
}

/// One of the list fields (scale_w, tensor_balance_factor, offset_w, shift_bit) into `r`.
[[nodiscard]] inline result<> read_record_list(const std::string& field,
                                               const nlohmann::ordered_json& x,
                                               const std::string& at, layer_record& r) {
  if (!x.is_array())
    return record_value_error(at + " must be a list");
  for (const auto& item : x) {
    if (field == "scale_w" || field == "tensor_balance_factor") {
      auto s = json_number(item, at);
      if (!s)
        return s.error();
      (field == "scale_w" ? r.scale_w : r.tensor_balance_factor).push_back(s.value());
    } else if (field == "offset_w") {
      auto n = json_integer(item, at, INT32_MIN, INT32_MAX);
      if (!n)
        return n.error();
      r.offset_w.push_back(static_cast<std::int32_t>(n.value()));
    } else {
      auto n = json_integer(item, at, 0, UINT32_MAX);
      if (!n)
        return n.error();
      r.shift_bit.push_back(static_cast<std::uint32_t>(n.value()));
    }
  }
  return {};
}

/// Field `field` of a record entry (`at` names it) into `r`.
[[nodiscard]] inline result<> read_record_field(const std::string& field,
                                                const nlohmann::ordered_json& x,
                                                const std::string& at, layer_record& r) {
  if (field == "scale_d") {
    auto s = json_number(x, at);
    if (!s)
      return s.error();
    r.scale_d = s.value();
    return {};
  }
  if (field == "offset_d") {
    auto n = json_integer(x, at, INT32_MIN, INT32_MAX);
    if (!n)
      return n.error();
    r.offset_d = static_cast<std::int32_t>(n.value());
    return {};
  }
  if (field == "scale_w" || field == "tensor_balance_factor" || field == "offset_w" ||
      field == "shift_bit") {
    return read_record_list(field, x, at, r);
  }
  if (field == "skip_fusion") {
    if (!x.is_boolean())
      return record_value_error(at + " must be true or false");
    r.skip_fusion = x.get<bool>();
    return {};
  }
  if (field == "dst_type")
    return json_text(x, at, r.dst_type);
  if (field == "act_type")
    return json_text(x, at, r.act_type);
  if (field == "wts_type")
    return json_text(x, at, r.wts_type);
  if (field == "fakequant_precision_mode")
    return json_text(x, at, r.fakequant_precision_mode);
  return record_value_error(at + " is not a record field");
}

/// The record's fields from `j`, or errc::record_value_invalid naming the field.
[[nodiscard]] inline result<record_file> record_from_json(const nlohmann::ordered_json& j) {
  if (!j.is_object())
    return record_value_error("a record must be a JSON object keyed by layer name");
  record_file out;
  for (const auto& [key, v] : j.items()) {
    if (!v.is_object())
      return record_value_error("'" + key + "' must be an object");
    record_entry e;
    e.key = key;
    for (const auto& [field, x] : v.items()) {
      if (auto st = read_record_field(field, x, "'" + key + "." + field + "'", e.value); !st)
        return st.error();
    }
    out.records.push_back(std::move(e));
  }
  return out;
}

}  // namespace detail

/// Reads the JSON form and applies the record checks (`validate_record`). Never throws.
[[nodiscard]] inline result<record_file> try_read_record_json(
    std::string_view text, const std::vector<layer_info>* layers = nullptr) {
  const auto doc = detail::parse_json_ordered(text);
  if (!doc.ok) {
    return make_error(errc::record_value_invalid, "the record is not valid JSON at " +
                                                      std::to_string(doc.line) + ":" +
                                                      std::to_string(doc.column) + ": " + doc.what);
  }
  if (!doc.duplicate.empty()) {
    return make_error(errc::record_duplicate_key,
                      "key '" + doc.duplicate + "' appears twice in one object of the record");
  }
  auto parsed = detail::record_from_json(doc.value);
  if (!parsed)
    return parsed;
  record_file rec = std::move(parsed).value();
  std::vector<error> diags;
  validate_record(rec, layers, {}, diags);
  if (std::any_of(diags.begin(), diags.end(), is_error))
    return result<record_file>(std::move(diags));
  return {std::move(rec), std::move(diags)};
}

#if PTQ_EXCEPTIONS
/// nlohmann `from_json`; throws `ptq::exception` when the record breaks the rules.
inline void from_json(const nlohmann::ordered_json& j, record_file& rec) {
  auto r = try_read_record_json(j.dump());
  if (!r)
    throw exception(r.diagnostics(), format_diagnostics(r.diagnostics(), {}, "record"));
  rec = std::move(r).value();
}
#endif

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
