// The record as JSON: {"<layer>": {"scale_d": ..., "offset_d": ..., "scale_w": [...], ...}}, in
// the record's order, with the same fields and checks as the proto-text form. Adds nlohmann_json.
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

/// The record's fields from `j`, or errc::record_value_invalid naming the field.
[[nodiscard]] inline result<record_file> record_from_json(const nlohmann::ordered_json& j) {
  const auto fail = [](std::string message) -> result<record_file> {
    return make_error(errc::record_value_invalid, std::move(message));
  };
  if (!j.is_object())
    return fail("a record must be a JSON object keyed by layer name");
  record_file out;
  std::string error;  // what the checks below found, when they return false
  auto number = [&](const nlohmann::ordered_json& v, const std::string& at, float& dst) {
    if (!v.is_number() || v.is_boolean()) {
      error = at + " must be a number";
      return false;
    }
    dst = static_cast<float>(v.get<double>());
    return true;
  };
  auto integer = [&](const nlohmann::ordered_json& v, const std::string& at, long long lo,
                     long long hi, long long& dst) {
    // An unsigned value above LLONG_MAX would wrap in get<long long>(), so it is compared as is.
    const bool fits =
        v.is_number_unsigned()
            ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(hi)
            : v.is_number_integer() && v.get<long long>() >= lo && v.get<long long>() <= hi;
    if (!fits) {
      error =
          at + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
      return false;
    }
    dst = v.get<long long>();
    return true;
  };
  auto text = [&](const nlohmann::ordered_json& v, const std::string& at,
                  std::optional<std::string>& dst) {
    if (!v.is_string()) {
      error = at + " must be a string";
      return false;
    }
    dst = v.get<std::string>();
    return true;
  };
  for (const auto& [key, v] : j.items()) {
    if (!v.is_object()) {
      return fail("'" + key + "' must be an object");
    }
    record_entry e;
    e.key = key;
    auto& r = e.value;
    for (const auto& [field, x] : v.items()) {
      const std::string at = "'" + key + "." + field + "'";
      long long n = 0;
      if (field == "scale_d") {
        float s = 0;
        if (!number(x, at, s))
          return fail(error);
        r.scale_d = s;
      } else if (field == "offset_d") {
        if (!integer(x, at, INT32_MIN, INT32_MAX, n))
          return fail(error);
        r.offset_d = static_cast<std::int32_t>(n);
      } else if (field == "scale_w" || field == "tensor_balance_factor" || field == "offset_w" ||
                 field == "shift_bit") {
        if (!x.is_array()) {
          return fail(at + " must be a list");
        }
        for (const auto& item : x) {
          float s = 0;
          if (field == "scale_w" || field == "tensor_balance_factor") {
            if (!number(item, at, s))
              return fail(error);
            (field == "scale_w" ? r.scale_w : r.tensor_balance_factor).push_back(s);
          } else if (field == "offset_w") {
            if (!integer(item, at, INT32_MIN, INT32_MAX, n))
              return fail(error);
            r.offset_w.push_back(static_cast<std::int32_t>(n));
          } else {
            if (!integer(item, at, 0, UINT32_MAX, n))
              return fail(error);
            r.shift_bit.push_back(static_cast<std::uint32_t>(n));
          }
        }
      } else if (field == "skip_fusion") {
        if (!x.is_boolean()) {
          return fail(at + " must be true or false");
        }
        r.skip_fusion = x.get<bool>();
      } else if (field == "dst_type") {
        if (!text(x, at, r.dst_type))
          return fail(error);
      } else if (field == "act_type") {
        if (!text(x, at, r.act_type))
          return fail(error);
      } else if (field == "wts_type") {
        if (!text(x, at, r.wts_type))
          return fail(error);
      } else if (field == "fakequant_precision_mode") {
        if (!text(x, at, r.fakequant_precision_mode))
          return fail(error);
      } else {
        return fail(at + " is not a record field");
      }
    }
    out.records.push_back(std::move(e));
  }
  return out;
}

}  // namespace detail

/// Reads the JSON form and applies the record checks (`validate_record`). Never throws.
[[nodiscard]] inline result<record_file> try_read_record_json(
    std::string_view text, const std::vector<record_layer_shape>* layers = nullptr) {
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
