// The toolkit's record file (`ScaleOffsetRecord`, protobuf text; docs/calibrate.md): the model, the
// writer (fields in field-number order, floats as the toolkit prints them) and the reader with
// the toolkit's checks. Reuses the prototext lexer for `line:col`.
// Depends on: core, detail, prototext and config (the layer description).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ptq/config/plan.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/layer_record.hpp"
#include "ptq/detail/find.hpp"
#include "ptq/detail/float_format.hpp"
#include "ptq/detail/text_escape.hpp"
#include "ptq/prototext/diagnostics.hpp"
#include "ptq/prototext/text_binder.hpp"
#include "ptq/prototext/text_tree.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// One `record { key: ... value { ... } }` entry.
struct record_entry {
  std::string key;  ///< the layer name
  layer_record value;
  friend bool operator==(const record_entry& a, const record_entry& b) {
    return a.key == b.key && a.value == b.value;
  }
};

/// `ScaleOffsetRecord`: the whole record file, entries in the order written.
struct record_file {
  std::vector<record_entry> records;
  [[nodiscard]] const layer_record* find(std::string_view key) const noexcept {
    const auto* e = detail::find_by(records, &record_entry::key, key);
    return e ? &e->value : nullptr;
  }
  friend bool operator==(const record_file& a, const record_file& b) {
    return a.records == b.records;
  }
};

namespace detail {

inline std::string record_float(float v) {
  return python_repr(toolkit_double(v));
}

inline void record_line(std::string& out, int depth, const std::string& text) {
  out.append(static_cast<std::size_t>(depth) * 2, ' ');
  out += text;
  out += '\n';
}

}  // namespace detail

/// The record as protobuf text, in field-number order; floats are printed as the toolkit's
/// Python writer prints them (shortest float32 form).
[[nodiscard]] inline std::string write_record(const record_file& rec) {
  std::string out;
  for (const auto& e : rec.records) {
    using detail::record_float;
    using detail::record_line;
    record_line(out, 0, "record {");
    record_line(out, 1, "key: " + detail::quote_text(e.key));
    record_line(out, 1, "value {");
    const auto& v = e.value;
    if (v.scale_d)
      record_line(out, 2, "scale_d: " + record_float(*v.scale_d));
    if (v.offset_d)
      record_line(out, 2, "offset_d: " + std::to_string(*v.offset_d));
    for (const float s : v.scale_w)
      record_line(out, 2, "scale_w: " + record_float(s));
    for (const auto o : v.offset_w)
      record_line(out, 2, "offset_w: " + std::to_string(o));
    for (const auto s : v.shift_bit)
      record_line(out, 2, "shift_bit: " + std::to_string(s));
    for (const float f : v.tensor_balance_factor) {
      record_line(out, 2, "tensor_balance_factor: " + record_float(f));
    }
    if (v.skip_fusion)
      record_line(out, 2, std::string("skip_fusion: ") + (*v.skip_fusion ? "true" : "false"));
    if (v.dst_type)
      record_line(out, 2, "dst_type: " + detail::quote_text(*v.dst_type));
    if (v.act_type)
      record_line(out, 2, "act_type: " + detail::quote_text(*v.act_type));
    if (v.wts_type)
      record_line(out, 2, "wts_type: " + detail::quote_text(*v.wts_type));
    if (v.fakequant_precision_mode) {
      record_line(out, 2,
                  "fakequant_precision_mode: " + detail::quote_text(*v.fakequant_precision_mode));
    }
    record_line(out, 1, "}");
    record_line(out, 0, "}");
  }
  return out;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

class record_binder : public text::text_binder<record_binder, float> {
 public:
  using base = text::text_binder<record_binder, float>;
  friend base;
  explicit record_binder(std::vector<ptq::error>& diags) : base(diags) {}

  void bind_root(const text::text_message& msg, record_file& rec,
                 std::vector<source_region>& where) {
    for (const auto& f : msg) {
      if (f.name == "record") {
        for (const auto& v : f.values) {
          if (!expect_message(f, v))
            continue;
          record_entry e;
          bool has_key = false;
          for (const auto& g : v.fields) {
            if (g.name == "key") {
              setting<std::string> key;
              bind_scalar(g, key, &base::to_string_value);
              has_key = key.has_value();
              if (has_key)
                e.key = *key;
            } else if (g.name == "value") {
              if (!expect_single(g) || !expect_message(g, g.values.front()))
                continue;
              bind_value(g.values.front().fields, e.value);  // a second block merges
            } else if (g.name == "kv_cache_value") {
              error(errc::unknown_field,
                    "kv_cache_value records (KV-cache quantization) are not supported by ptq",
                    g.name_region);
            } else {
              unknown(g, "MapFiledEntry", {"key", "value"});
            }
          }
          if (!has_key) {
            error(errc::record_missing_field, "record entry without a key", f.name_region);
            continue;
          }
          rec.records.push_back(std::move(e));
          where.push_back(f.name_region);
        }
      } else if (f.name == "prune_record") {
        continue;  // pruning records belong to another feature; kept out of calibration
      } else {
        unknown(f, "ScaleOffsetRecord", {"record", "prune_record"});
      }
    }
  }

 private:
  void bind_value(const text::text_message& msg, layer_record& r) {
    setting<float> scale_d;
    setting<std::int32_t> offset_d;
    setting<bool> skip_fusion;
    setting<std::string> dst_type, act_type, wts_type, fq_mode;
    for (const auto& f : msg) {
      const auto& n = f.name;
      if (n == "scale_d") {
        bind_scalar(f, scale_d, &base::to_float);
      } else if (n == "offset_d") {
        bind_scalar(f, offset_d, &base::to_int32);
      } else if (n == "scale_w") {
        bind_repeated_scalar(f, r.scale_w, &base::to_float);
      } else if (n == "offset_w") {
        bind_repeated_scalar(f, r.offset_w, &base::to_int32);
      } else if (n == "shift_bit") {
        bind_repeated_scalar(f, r.shift_bit, &base::to_uint32);
      } else if (n == "tensor_balance_factor") {
        bind_repeated_scalar(f, r.tensor_balance_factor, &base::to_float);
      } else if (n == "skip_fusion") {
        bind_scalar(f, skip_fusion, &base::to_bool);
      } else if (n == "dst_type") {
        bind_scalar(f, dst_type, &base::to_string_value);
      } else if (n == "act_type") {
        bind_scalar(f, act_type, &base::to_string_value);
      } else if (n == "wts_type") {
        bind_scalar(f, wts_type, &base::to_string_value);
      } else if (n == "fakequant_precision_mode") {
        bind_scalar(f, fq_mode, &base::to_string_value);
      } else if (n == "scale_h" || n == "offset_h" || n == "scale_r" || n == "offset_r") {
        error(errc::unknown_field,
              "field '" + n +
                  "' belongs to recurrent layers (GRU/LSTM), which ptq does not calibrate",
              f.name_region);
      } else {
        unknown(f, "SingleLayerRecord",
                {"scale_d", "offset_d", "scale_w", "offset_w", "shift_bit", "tensor_balance_factor",
                 "skip_fusion", "dst_type", "act_type", "wts_type", "fakequant_precision_mode"});
      }
    }
    auto keep = [](auto& dst, const auto& src) {
      if (src.has_value())
        dst = *src;
    };
    keep(r.scale_d, scale_d);
    keep(r.offset_d, offset_d);
    keep(r.skip_fusion, skip_fusion);
    keep(r.dst_type, dst_type);
    keep(r.act_type, act_type);
    keep(r.wts_type, wts_type);
    keep(r.fakequant_precision_mode, fq_mode);
  }
};

inline bool positive_finite(float v) noexcept {
  return std::isfinite(v) && v > 0.0f;
}

}  // namespace detail

/// Checks a record as the toolkit does before it saves a model (docs/calibrate.md): offset ranges,
/// `offset_w == 0`, finite positive scales, lengths (1 or Cout; balance factors Cin) and type
/// names. With `layers` given, every key must be one of them and the lengths are checked
/// against the channel counts they know. `where[i]` is entry i's position (may be empty).
inline void validate_record(const record_file& rec, const std::vector<layer_info>* layers,
                            const std::vector<source_region>& where, std::vector<error>& diags) {
  auto fail = [&](errc code, std::size_t i, std::string message) {
    diags.push_back({code,
                     severity::error,
                     "record '" + rec.records[i].key + "': " + std::move(message),
                     i < where.size() ? where[i] : source_region{},
                     {}});
  };
  std::unordered_set<std::string_view> keys;
  keys.reserve(rec.records.size());
  std::optional<detail::name_index<layer_info>> shapes;
  if (layers)
    shapes.emplace(*layers, &layer_info::name);
  for (std::size_t i = 0; i < rec.records.size(); ++i) {
    const auto& e = rec.records[i];
    const auto& r = e.value;
    if (!keys.insert(e.key).second)
      fail(errc::record_duplicate_key, i, "the key appears twice");
    const layer_info* shape = nullptr;
    if (layers) {
      shape = shapes->find(e.key);
      if (!shape)
        fail(errc::record_unknown_layer, i, "no quantizable layer has this name");
    }
    const std::string act = r.act_type.value_or("INT8");
    const std::string wts = r.wts_type.value_or("INT8");
    if (act != "INT4" && act != "INT8" && act != "INT16") {
      fail(errc::record_value_invalid, i, "act_type \"" + act + "\" is not INT4, INT8 or INT16");
    }
    if (wts != "INT4" && wts != "INT6" && wts != "INT7" && wts != "INT8") {
      fail(errc::record_value_invalid, i,
           "wts_type \"" + wts + "\" is not INT4, INT6, INT7 or INT8");
    }
    if (act == "INT4" && e.key.find("AvgPool") != std::string::npos) {
      fail(errc::record_value_invalid, i, "an AvgPool layer cannot take INT4 activations");
    }
    if (!r.scale_d)
      fail(errc::record_missing_field, i, "scale_d is missing");
    if (r.scale_d && !detail::positive_finite(*r.scale_d)) {
      fail(errc::record_value_invalid, i, "scale_d must be finite and greater than 0");
    }
    if (!r.offset_d)
      fail(errc::record_missing_field, i, "offset_d is missing");
    if (r.offset_d) {
      const bool wide = act == "INT16";
      const std::int32_t lo = wide ? -32768 : -128;
      const std::int32_t hi = wide ? 32767 : 127;
      if (*r.offset_d < lo || *r.offset_d > hi) {
        fail(errc::record_value_invalid, i,
             "offset_d " + std::to_string(*r.offset_d) + " is outside [" + std::to_string(lo) +
                 ", " + std::to_string(hi) + "] for act_type " + act);
      }
    }
    for (const float s : r.scale_w) {
      if (!detail::positive_finite(s)) {
        fail(errc::record_value_invalid, i, "every scale_w must be finite and greater than 0");
        break;
      }
    }
    for (const auto o : r.offset_w) {
      if (o != 0) {
        fail(errc::record_value_invalid, i, "offset_w must be 0 (weights are symmetric)");
        break;
      }
    }
    if (r.scale_w.size() != r.offset_w.size()) {
      fail(errc::record_length_mismatch, i,
           std::to_string(r.scale_w.size()) + " scale_w but " + std::to_string(r.offset_w.size()) +
               " offset_w");
    } else if (shape && shape->out_channels && r.scale_w.size() != 1 &&
               r.scale_w.size() != *shape->out_channels) {
      fail(errc::record_length_mismatch, i,
           std::to_string(r.scale_w.size()) +
               " scale_w; expected 1 or Cout = " + std::to_string(*shape->out_channels));
    }
    for (const auto b : r.shift_bit) {
      if (b > 16) {
        fail(errc::record_value_invalid, i, "shift_bit values must be 0 or in [1, 16]");
        break;
      }
    }
    if (!r.tensor_balance_factor.empty()) {
      if (shape && shape->in_channels && r.tensor_balance_factor.size() != *shape->in_channels) {
        fail(errc::record_length_mismatch, i,
             std::to_string(r.tensor_balance_factor.size()) +
                 " tensor_balance_factor; expected Cin = " + std::to_string(*shape->in_channels));
      }
      constexpr float eps = std::numeric_limits<float>::epsilon();
      for (const float f : r.tensor_balance_factor) {
        if (!(f >= eps && f <= 1.0f / eps)) {
          fail(errc::record_value_invalid, i,
               "tensor_balance_factor values must be in [FLT_EPSILON, 1/FLT_EPSILON]");
          break;
        }
      }
    }
  }
}

/// Reads and checks a record file (see `validate_record`). Errors carry `line:col` from the
/// same lexer as the config. Never throws.
[[nodiscard]] inline result<record_file> try_parse_record(
    std::string_view text, const std::vector<layer_info>* layers = nullptr,
    text_limits limits = {}) {
  auto tree = text::parse_text_tree(text, limits);
  if (!tree)
    return result<record_file>(tree.diagnostics());
  std::vector<error> diags;
  record_file rec;
  std::vector<source_region> where;
  detail::record_binder(diags).bind_root(tree.value(), rec, where);
  if (std::none_of(diags.begin(), diags.end(), is_error)) {
    validate_record(rec, layers, where, diags);
  }
  if (std::any_of(diags.begin(), diags.end(), is_error))
    return result<record_file>(std::move(diags));
  return {std::move(rec), std::move(diags)};
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
