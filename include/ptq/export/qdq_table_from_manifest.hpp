// The QDQ table of a record checked against the model manifest (docs/export.md, The QDQ
// table): every record layer must be in the manifest, the scale and factor counts must fit its
// weights, and the manifest adds each layer's type, weight name and shape, conv attributes, the
// bias it deploys with (fused with its BatchNorm as the calibration fused it) and the weight
// codes at qmin. The record-only table and the types are in qdq_table.hpp.
// Depends on: detail, algorithms (BatchNorm fusion, DMQ) and session (the manifest).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ptq/algorithms/activations/dmq.hpp"
#include "ptq/algorithms/layer/conv_bn_fusion.hpp"
#include "ptq/detail/find.hpp"
#include "ptq/export/qdq_table.hpp"
#include "ptq/session/model_manifest.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

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
      c = (ci / (w.shape[0] / l.conv.groups)) * w.shape[1] + (i / per) % w.shape[1];
    }
    const float s = w.scales.size() == 1 ? w.scales[0] : w.scales[c];
    l.weight_codes_at_qmin +=
        static_cast<std::size_t>(std::nearbyint(v[i] / s) <= static_cast<float>(w.qmin));
  }
}

/// The record's scale_w and DMQ factor counts against the manifest's weight: 1 or Cout scales,
/// Cin factors.
[[nodiscard]] inline result<> check_weight_counts(const qdq_layer& l, const layer_record& r,
                                                  const manifest_layer& m) {
  if (l.cout != 0 && r.scale_w.size() != 1 && r.scale_w.size() != l.cout) {
    return export_error(errc::export_shape_mismatch, l.name,
                        std::to_string(r.scale_w.size()) + " scale_w, but the weight '" +
                            m.weight_name + "' has Cout = " + std::to_string(l.cout) +
                            " (expected 1 or " + std::to_string(l.cout) + ")");
  }
  if (l.cin != 0 && !l.dmq_factors.empty() && l.dmq_factors.size() != l.cin) {
    return export_error(errc::export_shape_mismatch, l.name,
                        std::to_string(l.dmq_factors.size()) +
                            " tensor_balance_factor, but the weight '" + m.weight_name +
                            "' has Cin = " + std::to_string(l.cin));
  }
  return {};
}

/// The manifest's side of a layer with a weight: its shape, bias (fused with the BatchNorm as
/// the calibration fused it, otherwise kept), kernel size, and the codes at qmin of the weight
/// the scales were taken on.
[[nodiscard]] inline result<> add_manifest_weight(qdq_layer& l, qdq_weight& w,
                                                  const manifest_layer& m, const qdq_options& opt) {
  const std::string& name = l.name;
  w.shape = m.desc.weight.shape;
  if (m.desc.bias) {
    l.bias.resize(m.desc.bias->size());
    m.desc.bias->convert(0, l.bias.size(), l.bias.data());
  }
  l.kernel.assign(
      w.shape.begin() + std::min<std::ptrdiff_t>(2, static_cast<std::ptrdiff_t>(w.shape.size())),
      w.shape.end());
  bool fuse = opt.fuse_batch_norm && m.desc.batch_norm.has_value();
  for (const auto& s : opt.skip_fusion_layers)
    fuse = fuse && s != name;
  std::vector<float> wv(m.desc.weight.size());
  m.desc.weight.convert(0, wv.size(), wv.data());
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

/// One layer of the table from its record entry and its manifest layer.
[[nodiscard]] inline result<qdq_layer> table_layer(const record_entry& e, const manifest_layer& m,
                                                   const qdq_options& opt) {
  auto head = table_layer_of_record(e, opt);
  if (!head)
    return head.error();
  qdq_layer l = std::move(head).value();
  l.type = m.desc.type;
  l.conv = m.desc.conv;
  l.cout = layer_output_channels(m.desc);
  l.cin = layer_input_channels(m.desc);
  if (m.desc.type == layer_type::avg_pool2d)
    return l;  // AvgPool2d: the record's scale_w is the toolkit's constant 1
  if (auto st = check_weight_values(l.name, e.value); !st)
    return st.error();
  if (auto st = check_weight_counts(l, e.value, m); !st)
    return st.error();
  qdq_weight w = weight_of_record(l.name, e.value);
  if (!m.weight_name.empty())
    w.tensor = m.weight_name;
  w.axis = weight_axis(m.desc.type);
  if (auto st = add_manifest_weight(l, w, m, opt); !st)
    return st.error();
  l.weight = std::move(w);
  return l;
}

}  // namespace detail

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
    auto l = detail::table_layer(*e, m, opt);
    if (!l)
      return l.error();
    t.layers.push_back(std::move(l.value()));
  }
  return t;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
