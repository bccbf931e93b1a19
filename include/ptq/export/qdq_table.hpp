// The format-agnostic QDQ table (docs/export.md, The QDQ table): per quantized layer
// the activation tensor (scale, zero point, dtype, bits), the weight tensor (per-axis scales,
// zero points, the output-channel axis, bits), the DMQ factors and the FORCE_FP16 state, all
// read from a record and, where known, the model manifest. Every exporter (TensorRT cache, ncnn
// table, AIMET encodings, AMCT deploy numbers, ONNX QDQ) starts from this table, so the checks
// of the record against the model happen once. Plain aggregates; additions only.
// Depends on: core, detail, algorithms and session (record, manifest).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ptq/algorithms/activations/dmq.hpp"
#include "ptq/algorithms/layer/conv_bn_fusion.hpp"
#include "ptq/core/error.hpp"
#include "ptq/core/layer_type.hpp"
#include "ptq/detail/find.hpp"
#include "ptq/detail/float_format.hpp"
#include "ptq/session/model_manifest.hpp"
#include "ptq/session/record.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// The integer container of a quantized tensor. Bits below 8 (INT4/6/7) live in an 8-bit
/// container; `qmin`/`qmax` of the tensor carry the narrower range.
enum class qdq_dtype : std::uint8_t { int8, uint8, int16, uint16 };

[[nodiscard]] constexpr std::string_view to_string(qdq_dtype t) noexcept {
  switch (t) {
    case qdq_dtype::int8:
      return "int8";
    case qdq_dtype::uint8:
      return "uint8";
    case qdq_dtype::int16:
      return "int16";
    case qdq_dtype::uint16:
      return "uint16";
  }
  return "";
}

/// A layer's quantized input activation: `q = clamp(round(x / scale) + zero_point, qmin, qmax)`,
/// ties to even, in the dtype's domain (uint8: AMCT's offset + 2^(bits-1)).
struct qdq_activation {
  std::string tensor;  ///< the manifest's layer name (the record key)
  float scale = 1.0f;  ///< AMCT scale_d
  std::int32_t zero_point = 0;
  std::int32_t offset_d = 0;  ///< AMCT's signed folded offset, whatever the dtype
  qdq_dtype dtype = qdq_dtype::int8;
  int bits = 8;  ///< from act_type: 4, 8 or 16
  std::int32_t qmin = -128;
  std::int32_t qmax = 127;
};

/// A layer's quantized weight: `q = clamp(round(w / scales[c]), qmin, qmax)` along `axis`.
struct qdq_weight {
  std::string tensor;                     ///< the manifest's weight name, else "<layer>.weight"
  std::vector<float> scales;              ///< AMCT scale_w: 1 (per tensor) or Cout values
  std::vector<std::int32_t> zero_points;  ///< AMCT offset_w (always 0), as many as scales
  int axis = 0;  ///< output-channel axis of the weight in the manifest's (PyTorch) layout
  int bits = 8;  ///< from wts_type: 4, 6, 7 or 8
  std::int32_t qmin = -128;
  std::int32_t qmax = 127;
  qdq_dtype dtype = qdq_dtype::int8;
  std::vector<std::size_t> shape;  ///< the weight's shape when the manifest is known
};

/// One quantized layer of the table.
struct qdq_layer {
  std::string name;  ///< the record key (manifest layer name)
  /// The layer's name in the engine's own model, for formats keyed by it (ncnn's layer name:
  /// the ONNX node's name after onnx2ncnn); empty: `name`.
  std::string node;
  std::optional<layer_type> type;  ///< known with a manifest
  std::size_t cout = 0;            ///< output channels (0: unknown)
  std::size_t cin = 0;             ///< input channels (0: unknown)
  std::size_t groups = 1;
  qdq_activation activation;
  std::optional<qdq_weight> weight;  ///< absent for AvgPool2d
  /// DMQ factors b[c] per input channel (empty: none). The activation is divided by b and the
  /// weight multiplied by b along Cin; no file format holds them, a graph Mul(x, 1/b) does.
  std::vector<float> dmq_factors;
  bool force_fp16 = false;  ///< FORCE_FP16_QUANT: scale_d went through binary16
  /// The bias the deployed layer runs with: the manifest's, fused with its BatchNorm unless
  /// fusion is off for the layer (qdq_options). Empty: none or unknown.
  std::vector<float> bias;
  /// Known with a manifest: the conv's stride, padding, dilation and groups, the kernel size
  /// (the weight's dims after the first two), whether a BatchNorm follows the layer unfused, and
  /// how many weight codes are at qmin (-128 for 8 bits: an engine that clamps to ±127 moves
  /// them).
  conv_attributes conv;
  std::vector<std::size_t> kernel;
  bool kept_batch_norm = false;
  std::size_t weight_codes_at_qmin = 0;
};

/// The whole table, layers in the manifest's order (the record's without a manifest).
struct qdq_table {
  std::vector<qdq_layer> layers;
  [[nodiscard]] const qdq_layer* find(std::string_view name) const noexcept {
    for (const auto& l : layers) {
      if (l.name == name)
        return &l;
    }
    return nullptr;
  }
  [[nodiscard]] qdq_layer* find(std::string_view name) noexcept {
    return const_cast<qdq_layer*>(static_cast<const qdq_table&>(*this).find(name));
  }
};

/// How the table is built.
struct qdq_options {
  /// Activations as uint8/uint16 with zero point offset_d + 2^(bits-1) (ONNX's asymmetric
  /// convention) instead of int8/int16 with zero point offset_d; the grid is the same.
  bool unsigned_activations = false;
  /// BatchNorm fusion as in the calibration (`do_fusion`, `skip_fusion_layers`): decides
  /// which bias a layer with a BatchNorm deploys with.
  bool fuse_batch_norm = true;
  std::vector<std::string> skip_fusion_layers;
};

namespace detail {

[[nodiscard]] inline error export_error(errc code, const std::string& layer, std::string what) {
  return make_error(code, "layer '" + layer + "': " + std::move(what));
}

/// Bits of an "INT<n>" type name (0 when it is not one ptq knows).
[[nodiscard]] inline int type_bits(const std::string& t) noexcept {
  if (t == "INT4")
    return 4;
  if (t == "INT6")
    return 6;
  if (t == "INT7")
    return 7;
  if (t == "INT8")
    return 8;
  if (t == "INT16")
    return 16;
  return 0;
}

/// The output-channel axis of a weight in PyTorch layout (docs/export.md): ConvTranspose 1
/// (`[Cin, Cout/g, k...]`), everything else 0 (Linear `[Cout, Cin]` is ONNX Gemm with transB=1).
[[nodiscard]] constexpr int weight_axis(layer_type t) noexcept {
  return is_conv_transpose(t) ? 1 : 0;
}

/// How many of the weight's codes (the weight its scales were taken on: fused, balanced) are
/// at qmin, per output channel as the layer's scales go.
inline void count_codes_at_qmin(qdq_layer& l, const qdq_weight& w, const std::vector<float>& v) {
  if (v.empty() || l.cout == 0 || v.size() % l.cout != 0)
    return;
  const bool transpose = l.type && is_conv_transpose(*l.type);
  const std::size_t n = v.size();
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t c = i / (n / l.cout);
    if (transpose) {  // [Cin, Cout/g, k...]: AMCT's Cout index g·(Cout/g) + j
      const std::size_t per = n / (w.shape[0] * w.shape[1]), ci = i / (w.shape[1] * per);
      c = (ci / (w.shape[0] / l.groups)) * w.shape[1] + (i / per) % w.shape[1];
    }
    const float s = w.scales.size() == 1 ? w.scales[0] : w.scales[c];
    l.weight_codes_at_qmin +=
        static_cast<std::size_t>(std::nearbyint(v[i] / s) <= static_cast<float>(w.qmin));
  }
}

/// The record's scale_d, and the activation and weight bits of its act_type and wts_type.
struct record_bits {
  int activation = 8;
  int weight = 8;
};

[[nodiscard]] inline result<record_bits> check_record_types(const std::string& name,
                                                            const layer_record& r) {
  if (!r.scale_d || !r.offset_d)
    return export_error(errc::export_value_invalid, name, "the record has no scale_d/offset_d");
  if (!std::isfinite(*r.scale_d) || !(*r.scale_d > 0.0f)) {
    return export_error(errc::export_value_invalid, name,
                        "scale_d " + shortest_repr(*r.scale_d) + " is not finite and positive");
  }
  record_bits bits{type_bits(r.act_type.value_or("INT8")), type_bits(r.wts_type.value_or("INT8"))};
  if (bits.activation != 4 && bits.activation != 8 && bits.activation != 16)
    return export_error(errc::export_value_invalid, name, "act_type is not INT4, INT8 or INT16");
  if (bits.weight == 0 || bits.weight == 16) {
    return export_error(errc::export_value_invalid, name,
                        "wts_type is not INT4, INT6, INT7 or INT8");
  }
  return bits;
}

/// The activation's quantizer from the record's scale_d and offset_d on `abits` bits.
[[nodiscard]] inline result<qdq_activation> activation_of_record(const std::string& name,
                                                                 const layer_record& r, int abits,
                                                                 const qdq_options& opt) {
  qdq_activation a;
  a.tensor = name;
  a.scale = *r.scale_d;
  a.offset_d = *r.offset_d;
  a.bits = abits;
  const std::int32_t half = std::int32_t{1} << (abits - 1);
  if (a.offset_d < -half || a.offset_d > half - 1) {
    return export_error(errc::export_value_invalid, name,
                        "offset_d " + std::to_string(a.offset_d) + " is outside [" +
                            std::to_string(-half) + ", " + std::to_string(half - 1) + "] for " +
                            std::to_string(abits) + " bits");
  }
  const bool wide = abits > 8;
  if (opt.unsigned_activations) {
    a.dtype = wide ? qdq_dtype::uint16 : qdq_dtype::uint8;
    a.zero_point = a.offset_d + half;
    a.qmin = 0;
    a.qmax = 2 * half - 1;
  } else {
    a.dtype = wide ? qdq_dtype::int16 : qdq_dtype::int8;
    a.zero_point = a.offset_d;
    a.qmin = -half;
    a.qmax = half - 1;
  }
  return a;
}

/// The record's weight scales and offsets, and its factor count, checked against the layer
/// (its Cout and Cin when the manifest gives them).
[[nodiscard]] inline result<> check_weight_record(const qdq_layer& l, const layer_record& r,
                                                  const manifest_layer* m) {
  const std::string& name = l.name;
  if (r.scale_w.empty())
    return export_error(errc::export_value_invalid, name, "the record has no scale_w");
  for (std::size_t c = 0; c < r.scale_w.size(); ++c) {
    if (!std::isfinite(r.scale_w[c]) || !(r.scale_w[c] > 0.0f)) {
      return export_error(errc::export_value_invalid, name,
                          "scale_w[" + std::to_string(c) + "] " + shortest_repr(r.scale_w[c]) +
                              " is not finite and positive");
    }
  }
  if (!r.offset_w.empty() && r.offset_w.size() != r.scale_w.size()) {
    return export_error(errc::export_shape_mismatch, name,
                        std::to_string(r.scale_w.size()) + " scale_w but " +
                            std::to_string(r.offset_w.size()) + " offset_w");
  }
  for (const auto o : r.offset_w) {
    if (o != 0) {
      return export_error(errc::export_value_invalid, name,
                          "offset_w must be 0 (weights are symmetric)");
    }
  }
  if (m && l.cout != 0 && r.scale_w.size() != 1 && r.scale_w.size() != l.cout) {
    return export_error(errc::export_shape_mismatch, name,
                        std::to_string(r.scale_w.size()) + " scale_w, but the weight '" +
                            m->weight_name + "' has Cout = " + std::to_string(l.cout) +
                            " (expected 1 or " + std::to_string(l.cout) + ")");
  }
  if (m && l.cin != 0 && !l.dmq_factors.empty() && l.dmq_factors.size() != l.cin) {
    return export_error(errc::export_shape_mismatch, name,
                        std::to_string(l.dmq_factors.size()) +
                            " tensor_balance_factor, but the weight '" + m->weight_name +
                            "' has Cin = " + std::to_string(l.cin));
  }
  return {};
}

/// The manifest's side of a layer with a weight: its shape, bias (fused with the BatchNorm as
/// the calibration fused it, otherwise kept), convolution attributes, and the codes at qmin of
/// the weight the scales were taken on.
[[nodiscard]] inline result<> add_manifest_weight(qdq_layer& l, qdq_weight& w,
                                                  const manifest_layer& m, const qdq_options& opt) {
  const std::string& name = l.name;
  w.shape.assign(m.desc.weight.shape().begin(), m.desc.weight.shape().end());
  if (m.desc.bias)
    l.bias.assign(m.desc.bias->begin(), m.desc.bias->end());
  l.conv = m.desc.conv;
  l.kernel.assign(
      w.shape.begin() + std::min<std::ptrdiff_t>(2, static_cast<std::ptrdiff_t>(w.shape.size())),
      w.shape.end());
  bool fuse = opt.fuse_batch_norm && m.desc.batch_norm.has_value();
  for (const auto& s : opt.skip_fusion_layers)
    fuse = fuse && s != name;
  std::vector<float> wv(m.desc.weight.begin(), m.desc.weight.end());
  if (fuse) {
    auto f = fuse_conv_bn(wv, l.bias, l.cout, *m.desc.batch_norm, name);
    if (!f)
      return export_error(errc::export_shape_mismatch, name, f.error().message);
    if (is_finite(f.value())) {  // the toolkit skips a fusion that is not finite (W606)
      l.bias = std::move(f.value().bias);
      wv = std::move(f.value().weight);
    } else {
      fuse = false;
    }
  }
  l.kept_batch_norm = m.desc.batch_norm.has_value() && !fuse;
  if (!l.dmq_factors.empty() &&
      !dmq_apply_to_weight(wv.data(), w.shape, m.desc.type, m.desc.conv.groups, l.dmq_factors))
    wv.clear();  // a factor count that does not fit was reported above
  count_codes_at_qmin(l, w, wv);
  return {};
}

/// One layer of the table from its record entry and, when given, its manifest layer.
[[nodiscard]] inline result<qdq_layer> table_layer(const record_entry& e, const manifest_layer* m,
                                                   const qdq_options& opt) {
  const auto& r = e.value;
  qdq_layer l;
  l.name = e.key;
  auto bits = check_record_types(l.name, r);
  if (!bits)
    return bits.error();
  const int wbits = bits->weight;
  auto a = activation_of_record(l.name, r, bits->activation, opt);
  if (!a)
    return a.error();
  l.activation = std::move(a).value();
  l.force_fp16 = r.fakequant_precision_mode.value_or("") == "FORCE_FP16_QUANT";
  l.dmq_factors = r.tensor_balance_factor;
  for (const float b : l.dmq_factors) {
    if (!std::isfinite(b) || !(b > 0.0f)) {
      return export_error(errc::export_value_invalid, l.name,
                          "a DMQ factor is not finite and positive");
    }
  }
  if (m) {
    l.type = m->desc.type;
    l.groups = m->desc.conv.groups;
    l.cout = layer_output_channels(m->desc);
    l.cin = layer_input_channels(m->desc);
    if (m->desc.type == layer_type::avg_pool2d)
      return l;  // AvgPool2d: the record's scale_w is the toolkit's constant 1
  }
  if (auto st = check_weight_record(l, r, m); !st)
    return st.error();
  qdq_weight w;
  w.tensor = m && !m->weight_name.empty() ? m->weight_name : l.name + ".weight";
  w.scales = r.scale_w;
  w.zero_points.assign(r.scale_w.size(), 0);
  w.axis = m ? weight_axis(m->desc.type) : 0;
  w.bits = wbits;
  w.qmin = -(std::int32_t{1} << (wbits - 1));
  w.qmax = (std::int32_t{1} << (wbits - 1)) - 1;
  if (m) {
    if (auto st = add_manifest_weight(l, w, *m, opt); !st)
      return st.error();
  }
  l.weight = std::move(w);
  return l;
}

}  // namespace detail

/// The table of a record alone: every record entry is a layer, its weight named
/// "<layer>.weight" with axis 0 and Cout unknown (formats that need Cout or the layer type
/// then ask for the manifest). Errors (E1202): a missing or non-finite scale, an offset out of
/// range for its bits, an unknown type name.
[[nodiscard]] inline result<qdq_table> make_qdq_table(const record_file& record,
                                                      const qdq_options& opt = {}) {
  qdq_table t;
  for (const auto& e : record.records) {
    auto l = detail::table_layer(e, nullptr, opt);
    if (!l)
      return l.error();
    t.layers.push_back(std::move(l.value()));
  }
  return t;
}

/// The table of a record checked against the model manifest, in the manifest's layer order.
/// Errors: a record layer the manifest does not have (E1201, listing the manifest's layers),
/// a scale_w count that is neither 1 nor the weight's Cout or a DMQ factor count other than
/// Cin (E1203), and the checks of the record-only overload (E1202).
[[nodiscard]] inline result<qdq_table> make_qdq_table(const record_file& record,
                                                      const model_manifest& model,
                                                      const qdq_options& opt = {}) {
  std::unordered_set<std::string_view> manifest_names;
  for (const auto& m : model.layers)
    manifest_names.insert(m.desc.name);
  for (const auto& e : record.records) {
    if (manifest_names.count(e.key) == 0u) {
      std::string names;
      for (const auto& m : model.layers)
        names += (names.empty() ? "" : ", ") + m.desc.name;
      return make_error(errc::export_layer_unknown,
                        "record layer '" + e.key + "' is not in the model manifest",
                        "the manifest's layers are " + names);
    }
  }
  qdq_table t;
  const detail::name_index<record_entry> entries(record.records, &record_entry::key);
  for (const auto& m : model.layers) {
    const auto* e = entries.find(m.desc.name);
    if (!e)
      continue;  // not quantized
    auto l = detail::table_layer(*e, &m, opt);
    if (!l)
      return l.error();
    t.layers.push_back(std::move(l.value()));
  }
  return t;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
