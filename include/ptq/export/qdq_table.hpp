// The format-agnostic QDQ table (docs/export.md, The QDQ table): per quantized layer
// the activation tensor (scale, zero point, dtype, bits), the weight tensor (per-axis scales,
// zero points, the output-channel axis, bits), the DMQ factors and the FORCE_FP16 state. Every
// exporter (TensorRT cache, ncnn table, AIMET encodings, AMCT deploy numbers, ONNX QDQ) starts
// from this table, so the checks of the record happen once. This header builds it from a record
// alone and needs neither xtensor nor the algorithms; qdq_table_from_manifest.hpp checks it
// against the model manifest. Plain aggregates; additions only.
// Depends on: core, detail and session (the record).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ptq/core/conv_attributes.hpp"
#include "ptq/core/error.hpp"
#include "ptq/core/layer_type.hpp"
#include "ptq/detail/float_format.hpp"
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
  qdq_activation activation;
  std::optional<qdq_weight> weight;  ///< absent for AvgPool2d
  /// DMQ factors b[c] per input channel (empty: none). The activation is divided by b and the
  /// weight multiplied by b along Cin; no file format holds them, a graph Mul(x, 1/b) does.
  std::vector<float> dmq_factors;
  bool force_fp16 = false;  ///< FORCE_FP16_QUANT: scale_d went through binary16
  /// The bias the deployed layer runs with: the manifest's, fused with its BatchNorm unless
  /// fusion is off for the layer (qdq_options). Empty: none or unknown.
  std::vector<float> bias;
  /// Known with a manifest: the conv's stride, padding, dilation and groups (1 without one),
  /// the kernel size
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

/// The record's weight scales and offsets: finite, positive, as many offsets (all 0) as scales.
[[nodiscard]] inline result<> check_weight_values(const std::string& name, const layer_record& r) {
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
  return {};
}

/// A layer's record side before its weight: the activation's quantizer, FORCE_FP16 and the
/// DMQ factors, checked.
[[nodiscard]] inline result<qdq_layer> table_layer_of_record(const record_entry& e,
                                                             const qdq_options& opt) {
  const auto& r = e.value;
  qdq_layer l;
  l.name = e.key;
  auto bits = check_record_types(l.name, r);
  if (!bits)
    return bits.error();
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
  return l;
}

/// The weight's quantizer from the record's scale_w (checked with check_weight_values), named
/// "<layer>.weight" with axis 0 until a manifest says otherwise.
[[nodiscard]] inline qdq_weight weight_of_record(const std::string& name, const layer_record& r) {
  const int wbits = type_bits(r.wts_type.value_or("INT8"));
  qdq_weight w;
  w.tensor = name + ".weight";
  w.scales = r.scale_w;
  w.zero_points.assign(r.scale_w.size(), 0);
  w.bits = wbits;
  w.qmin = -(std::int32_t{1} << (wbits - 1));
  w.qmax = (std::int32_t{1} << (wbits - 1)) - 1;
  return w;
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
    auto l = detail::table_layer_of_record(e, opt);
    if (!l)
      return l.error();
    if (auto st = detail::check_weight_values(e.key, e.value); !st)
      return st.error();
    l.value().weight = detail::weight_of_record(e.key, e.value);
    t.layers.push_back(std::move(l.value()));
  }
  return t;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
