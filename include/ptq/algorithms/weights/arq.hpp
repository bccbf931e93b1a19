// ARQ weight quantization (docs/numerics.md, ARQ): per-tensor or per-output-channel min/max fed to
// the symmetric min/max kernel (offset 0, an all-zero channel gets scale 1), fake-quantization
// (in place or into a caller buffer) and integer weights into caller buffers.
// Depends on: core and kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ptq/algorithms/layer/tensor.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/quant.hpp"
#include "ptq/kernels/kernel_set.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// ARQ settings (JSON `weight_quant_params` of an arq layer).
struct arq_settings {
  int bits = 8;              ///< 8 by default; 6/7 (Conv2d) and 4 are allowed by the config
  bool channel_wise = true;  ///< one scale per output channel, else one per tensor
};

/// Weight quant params: scale_w / offset_w (length 1 or Cout) and the bit width.
struct weight_quant_result {
  std::vector<float> scale;
  std::vector<std::int32_t> offset;
  int bits = 8;
};

namespace detail {

/// min/max of channel o (all its runs); `bad` is set when a run holds a NaN or Inf.
inline kernels::minmax_result channel_minmax(const float* w, const channel_geometry& g,
                                             std::size_t o, const kernels::kernel_set& k,
                                             bool& bad) {
  kernels::minmax_result acc;
  for (std::size_t r = 0; r < g.segments_per_channel; ++r) {
    const kernels::minmax_result m = k.minmax(w + g.offset(o, r), g.segment);
    bad = bad || m.first_bad != g.segment;
    acc.min = m.min < acc.min ? m.min : acc.min;
    acc.max = m.max > acc.max ? m.max : acc.max;
  }
  return acc;
}

}  // namespace detail

/// ARQ: scale_w / offset_w of a weight in native layout ([Cout, Cin/g, k...] for Conv, [Cout, Cin]
/// for Linear, [Cin, Cout/g, k...] for ConvTranspose).
[[nodiscard]] inline result<weight_quant_result> arq_calibrate(
    const tensor_view& w, layer_type op, std::size_t groups, const arq_settings& s,
    const kernels::kernel_set& k = kernels::default_kernels()) {
  if (!valid_bits(s.bits)) {
    return make_error(errc::invalid_argument,
                      w.name + ": bits must be in [2, 16], got " + std::to_string(s.bits));
  }
  if (auto st = check_tensor_view(w); !st)
    return st.error();
  auto geo = output_channels(w.shape, op, groups, w.name);
  if (!geo)
    return geo.error();
  const channel_geometry& g = geo.value();
  std::vector<float> scratch;
  const float* data = float_values(w, scratch);
  weight_quant_result out;
  out.bits = s.bits;
  // A scale that is not finite (a range that overflows a float) names the tensor and the
  // channel; a tiny range is no error (process_scale makes its scale 1, docs/numerics.md).
  const auto push = [&](float mx, float mn) -> result<> {
    auto p = min_max_params(mx, mn, s.bits, false);
    if (!p) {
      const std::string where =
          s.channel_wise ? w.name + " channel " + std::to_string(out.scale.size()) : w.name;
      return make_error(p.error().code, where + ": " + p.error().message, p.error().note);
    }
    out.scale.push_back(p.value().scale);
    out.offset.push_back(0);
    return {};
  };
  if (!s.channel_wise) {
    auto all = checked_minmax(w.name, data, w.size(), k.minmax);
    if (!all)
      return all.error();
    auto st = push(all.value().max, all.value().min);
    if (!st)
      return st.error();
    return out;
  }
  // One pass: per-channel min/max with the NaN/Inf check; on a bad value, rescan in flat order
  // for the first bad index.
  out.scale.reserve(g.channels);
  out.offset.reserve(g.channels);
  bool bad = false;
  std::vector<kernels::minmax_result> ranges(g.channels);
  for (std::size_t o = 0; o < g.channels; ++o)
    ranges[o] = detail::channel_minmax(data, g, o, k, bad);
  if (bad)
    return checked_minmax(w.name, data, w.size(), k.minmax).error();
  for (const auto& m : ranges) {
    auto st = push(m.max, m.min);
    if (!st)
      return st.error();
  }
  return out;
}

namespace detail {

template <class Fn>
result<> for_each_channel_run(const std::vector<std::size_t>& shape, layer_type op,
                              std::size_t groups, const weight_quant_result& p,
                              std::string_view name, Fn&& fn) {
  auto geo = output_channels(shape, op, groups, name);
  if (!geo)
    return geo.error();
  const channel_geometry& g = geo.value();
  if (p.scale.size() != 1 && p.scale.size() != g.channels) {
    return make_error(errc::shape_mismatch, std::string(name) + ": " +
                                                std::to_string(p.scale.size()) + " scales for " +
                                                std::to_string(g.channels) + " channels");
  }
  if (p.offset.size() != p.scale.size()) {
    return make_error(errc::shape_mismatch,
                      std::string(name) + ": scale and offset lengths differ");
  }
  const quant_grid grid = make_grid(p.bits);
  for (std::size_t o = 0; o < g.channels; ++o) {
    const std::size_t c = p.scale.size() == 1 ? 0 : o;
    kernels::quantizer qz{p.scale[c], static_cast<float>(p.offset[c]),
                          static_cast<float>(grid.qmin), static_cast<float>(grid.qmax)};
    for (std::size_t r = 0; r < g.segments_per_channel; ++r)
      fn(g.offset(o, r), g.segment, qz);
  }
  return {};
}

}  // namespace detail

/// Fake-quantizes a weight (native layout) into out[0, w.size()) in C order: W <- clamp(round(W/s),
/// qmin, qmax) * s per output channel. `out` may be the weight's own memory when the weight is
/// float32 in C order (in place); memory the view reads otherwise is refused (E909).
/// ConvTranspose weights are fake-quantized too (a ptq decision).
[[nodiscard]] inline result<> arq_fake_quantize(
    const tensor_view& w, layer_type op, std::size_t groups, const weight_quant_result& p,
    float* out, const kernels::kernel_set& k = kernels::default_kernels()) {
  if (auto st = check_output_buffer(w, out); !st)
    return st;
  const float* src = w.in_place();
  if (src == nullptr) {  // converted into `out`, then quantized there
    w.convert(0, w.size(), out);
    src = out;
  }
  return detail::for_each_channel_run(
      w.shape, op, groups, p, w.name,
      [&](std::size_t off, std::size_t len, const kernels::quantizer& qz) {
        k.fake_quant(src + off, len, qz, out + off);
      });
}

/// Integer weights (native layout) into a caller buffer of w.size() elements.
[[nodiscard]] inline result<> arq_quantize_int8(
    const tensor_view& w, layer_type op, std::size_t groups, const weight_quant_result& p,
    std::int8_t* out, const kernels::kernel_set& k = kernels::default_kernels()) {
  if (p.bits > 8) {
    return make_error(errc::invalid_argument,
                      w.name + ": int8 output for a " + std::to_string(p.bits) + "-bit quantizer");
  }
  if (auto st = check_tensor_view(w); !st)
    return st;
  std::vector<float> scratch;
  const float* data = float_values(w, scratch);
  return detail::for_each_channel_run(
      w.shape, op, groups, p, w.name,
      [&](std::size_t off, std::size_t len, const kernels::quantizer& qz) {
        k.quantize_i8(data + off, len, qz, out + off);
      });
}

[[nodiscard]] inline result<> arq_quantize_int16(
    const tensor_view& w, layer_type op, std::size_t groups, const weight_quant_result& p,
    std::int16_t* out, const kernels::kernel_set& k = kernels::default_kernels()) {
  if (auto st = check_tensor_view(w); !st)
    return st;
  std::vector<float> scratch;
  const float* data = float_values(w, scratch);
  return detail::for_each_channel_run(
      w.shape, op, groups, p, w.name,
      [&](std::size_t off, std::size_t len, const kernels::quantizer& qz) {
        k.quantize_i16(data + off, len, qz, out + off);
      });
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
