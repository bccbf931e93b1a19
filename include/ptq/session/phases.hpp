// The work of each session phase on one layer, as free functions: Conv+BN fusion, the DMQ
// factors, the weight quantization (ARQ at once, AdaRound from samples) and one activation
// batch, and the record of the calibrated layers. calibration_session (calibration_session.hpp)
// checks the order of the calls and reports progress; these do the numbers, through the layer's
// calibrator (no algorithm enum is tested here).
// Depends on: core and algorithms.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "ptq/algorithms/activations/activation.hpp"
#include "ptq/algorithms/activations/dmq.hpp"
#include "ptq/algorithms/activations/ifmr.hpp"
#include "ptq/algorithms/activations/view_blocks.hpp"
#include "ptq/algorithms/layer/conv_bn_fusion.hpp"
#include "ptq/algorithms/layer_calibrator.hpp"
#include "ptq/algorithms/weights/arq.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/session/ada_layer.hpp"
#include "ptq/session/checks.hpp"
#include "ptq/session/record.hpp"
#include "ptq/session/session_layer.hpp"
#include "ptq/session/session_options.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

/// Whether phase 1 fuses the layer's BatchNorm: it has one, fusion is on and the layer is not in
/// skip_fusion_layers.
[[nodiscard]] inline bool fusion_wanted(const session_layer& l, const resolved_config& plan) {
  if (!l.desc.batch_norm || !plan.do_fusion)
    return false;
  return std::find(plan.skip_fusion_layers.begin(), plan.skip_fusion_layers.end(), l.desc.name) ==
         plan.skip_fusion_layers.end();
}

/// Phase 1, first step: the factors that fold the layer's BatchNorm into its weight and bias,
/// when fusion_wanted; none when a fusion would not be finite (W606 into `diags`, the engine
/// keeps running the BatchNorm). Changes nothing, so a failed create leaves every weight as it
/// was (the engine's own, when the session quantizes them where they lie).
[[nodiscard]] inline result<std::optional<conv_bn_factors>> plan_fusion(const session_layer& l,
                                                                        const resolved_config& plan,
                                                                        std::vector<error>& diags) {
  if (!fusion_wanted(l, plan))
    return std::optional<conv_bn_factors>{};
  const auto cout = layer_output_channels(l.desc);
  auto f = conv_bn_fusion_factors(l.desc.weight.size(), l.bias_storage, cout, *l.desc.batch_norm,
                                  l.desc.name);
  if (!f) {
    return in_layer(l.desc.name,
                    make_error(errc::session_layer_invalid, f.error().message, f.error().note));
  }
  if (!fusion_stays_finite(l.desc.weight_out, l.desc.weight.size(), f.value())) {
    diags.push_back(make_warning(errc::fusion_skipped,
                                 "layer '" + l.desc.name +
                                     "': Conv+BN fusion skipped, the fused values would not be "
                                     "finite"));
    return std::optional<conv_bn_factors>{};
  }
  return std::optional<conv_bn_factors>(std::move(f).value());
}

/// Phase 1, second step: the fusion, in place (the same products as fuse_conv_bn).
inline void apply_fusion(session_layer& l, const conv_bn_factors& f) {
  apply_conv_bn_factors(l.desc.weight_out, l.desc.weight.size(), f, l.desc.weight_out);
  l.bias_storage = f.bias;
  l.desc.bias = view_of(l.bias_storage.data(), {l.bias_storage.size()}, l.desc.name + ".bias");
  l.desc.batch_norm.reset();
  l.fused = true;
}

/// Phase 2: the DMQ factors of a layer from its (checked) input batch.
[[nodiscard]] inline result<> compute_balance_factors(session_layer& l, const tensor_view& input,
                                                      const kernels::kernel_set& k) {
  if (auto st = check_layer_input(l.desc, input); !st)
    return st;
  auto act = input;
  act.name = l.desc.name + " input";
  dmq_settings ds;
  ds.migration_strength = *l.plan.dmq_balancer_param;
  auto f = dmq_factors(act, l.desc.weight, l.desc.type, l.desc.conv.groups, ds, k);
  if (!f)
    return in_layer(l.desc.name, f.error());
  l.balance_factors = std::move(f).value();
  return {};
}

/// Phase 3, first step, for one enabled layer: checks that its weight can be quantized and
/// computes scale_w / offset_w, changing nothing. The weight is balanced by the DMQ factors into
/// `scratch` first when the layer has them. Returns nothing for the layers that get their
/// parameters otherwise (AvgPool2d, AdaRound).
[[nodiscard]] inline result<std::optional<weight_quant_result>> plan_layer_weights(
    const session_layer& l, std::vector<float>& scratch) {
  if (l.desc.type == layer_type::avg_pool2d)
    return std::optional<weight_quant_result>{};
  const std::vector<std::size_t>& shape = l.desc.weight.shape;
  tensor_view w = l.desc.weight;
  if (!l.balance_factors.empty()) {
    scratch.assign(l.desc.weight_out, l.desc.weight_out + w.size());
    if (auto st = dmq_apply_to_weight(scratch.data(), shape, l.desc.type, l.desc.conv.groups,
                                      l.balance_factors);
        !st) {
      return in_layer(l.desc.name, st.error());
    }
    w.data = scratch.data();
  }
  return std::visit(
      [&](const auto& c) -> result<std::optional<weight_quant_result>> {
        if constexpr (std::decay_t<decltype(c)>::needs_samples) {
          return std::optional<weight_quant_result>{};  // learned later by quantize_ada_layer
        } else {
          auto p = c.calibrate_weights(w, l.desc.type, l.desc.conv.groups);
          if (!p)
            return in_layer(l.desc.name, p.error());
          return std::optional<weight_quant_result>(std::move(p).value());
        }
      },
      *l.calibrator);
}

/// Phase 3, second step: balances the layer's weight by the DMQ factors and fake-quantizes it
/// with `params` (from plan_layer_weights; none for AdaRound layers, which keep the balanced
/// float weight for quantize_ada_layer). `scratch` holds the weight before quantization, for its
/// SQNR. The first step checked what could fail.
[[nodiscard]] inline result<> apply_layer_weights(session_layer& l,
                                                  std::optional<weight_quant_result> params,
                                                  std::vector<float>& scratch) {
  if (l.desc.type == layer_type::avg_pool2d) {
    l.weight_params = weight_quant_result{{1.0f}, {0}, 8};  // the toolkit's scale_w of 1
    return {};
  }
  float* const w = l.desc.weight_out;
  const std::size_t n = l.desc.weight.size();
  if (!l.balance_factors.empty()) {
    if (auto st = dmq_apply_to_weight(w, l.desc.weight.shape, l.desc.type, l.desc.conv.groups,
                                      l.balance_factors);
        !st) {
      return in_layer(l.desc.name, st.error());
    }
  }
  if (!params)
    return {};
  return std::visit(
      [&](const auto& c) -> result<> {
        if constexpr (!std::decay_t<decltype(c)>::needs_samples) {
          scratch.assign(w, w + n);
          if (auto st = c.fake_quantize_weights(l.desc.weight, l.desc.type, l.desc.conv.groups,
                                                *params, w);
              !st) {
            return in_layer(l.desc.name, st.error());
          }
          l.weight_sqnr_db = sqnr_db(scratch.data(), w, n);
          l.weight_params = std::move(params);
        }
        return {};
      },
      *l.calibrator);
}

/// Phase 3, AdaRound: learns the layer's rounding from `input` (the target from `float_input`,
/// or from `input` when null) and replaces its weight by the fake-quantized one.
[[nodiscard]] inline result<> quantize_ada_layer(session_layer& l, const tensor_view& input,
                                                 const tensor_view* float_input,
                                                 const session_options& options) {
  if (auto st = check_layer_input(l.desc, input); !st)
    return st;
  if (float_input) {
    if (auto st = check_layer_input(l.desc, *float_input); !st)
      return st;
    if (float_input->shape != input.shape) {
      return make_error(errc::session_input_invalid,
                        l.desc.name + ": the float input " + shape_string(float_input->shape) +
                            " and the input " + shape_string(input.shape) + " differ in shape");
    }
  }
  return std::visit(
      [&](auto& c) -> result<> {
        if constexpr (!std::decay_t<decltype(c)>::needs_samples) {
          return make_error(errc::session_call_invalid,
                            l.desc.name + ": not an AdaRound layer still to quantize");
        } else {
          ada_settings& as = c.weight_settings();
          as.seed = options.ada_seed;
          as.threads = options.threads;
          as.report_every = options.ada_report_every;
          as.on_progress = nullptr;
          if (options.on_ada_progress) {
            as.on_progress = [&options, &l](const ada_progress& e) {
              options.on_ada_progress(l.desc.name, e);
            };
          }
          auto r = ada_quantize_layer(l.desc, l.balance_factors, input, float_input, c);
          as.on_progress = nullptr;  // it refers to this call's options and layer
          if (!r)
            return in_layer(l.desc.name, r.error());
          auto& res = r.value();
          l.weight_sqnr_db = sqnr_db(l.desc.weight_out, res.weight.data(), res.weight.size());
          std::copy(res.weight.begin(), res.weight.end(), l.desc.weight_out);
          l.ada_changed = res.changed;
          l.weight_params = std::move(res.params);
          return {};
        }
      },
      *l.calibrator);
}

/// Phase 4 in the one-pass mode: one activation batch of a layer, divided by its DMQ factors and
/// observed; after `ctx.batch_num` batches the layer's activation is finalized (FORCE_FP16_QUANT
/// when `ctx.fp16`), with the search's statistics kept in `l.activation_stats` when the options
/// keep them. `ctx.scratch` holds the input divided by the factors. An input that is not float32
/// in C order (float16, bfloat16, strided) is converted a block at a time into what the observer
/// keeps, or into `ctx.scratch` on the options' threads when it is divided first: the same
/// numbers and errors as its float32 values.
[[nodiscard]] inline result<> observe_layer_batch(session_layer& l, const tensor_view& input,
                                                  const batch_context& ctx) {
  const std::size_t batch_num = ctx.batch_num;
  const bool keep_stats = ctx.options.keep_search_stats;
  std::vector<float>& scratch = ctx.scratch;
  if (auto st = check_layer_input(l.desc, input); !st)
    return st;
  const std::size_t n = input.size();
  // On the first batch, room for batch_num of its size (the usual run: batches of one size);
  // none when IFMR keeps the batches where they lie (a mapped float32 file).
  const bool kept_in_place = l.balance_factors.empty() && ifmr_observer::keeps_in_place(input);
  if (l.batches_seen == 0 && !kept_in_place &&
      batch_num <= std::numeric_limits<std::size_t>::max() / std::max<std::size_t>(n, 1)) {
    std::visit([&](auto& c) { c.reserve_activation(n * batch_num); }, *l.calibrator);
  }
  result<> st;
  if (!l.balance_factors.empty()) {
    scratch.resize(n);
    if (const float* x = input.in_place()) {
      std::copy(x, x + n, scratch.data());
    } else {
      convert_view(input, scratch.data(), ctx.options.threads);
    }
    st = divide_by_balance_factors(l, scratch.data(), input.shape);
    if (st)
      st = std::visit([&](auto& c) { return c.observe(scratch.data(), n); }, *l.calibrator);
  } else {
    st = std::visit([&](auto& c) { return c.observe(input); }, *l.calibrator);
  }
  if (!st)
    return in_layer(l.desc.name, st.error());
  if (++l.batches_seen == batch_num) {
    activation_search_stats stats;
    auto r = keep_stats ? finalize_with_stats(*l.calibrator, stats)
                        : std::visit([](const auto& c) { return c.finalize(); }, *l.calibrator);
    if (!r)
      return in_layer(l.desc.name, r.error());
    l.activation_params = ctx.fp16 ? with_fp16_scale(r.value()) : r.value();
    if (keep_stats)
      l.activation_stats = std::move(stats);
    l.calibrator.reset();
  }
  return {};
}

/// The toolkit's record (docs/calibrate.md) of calibrated `layers`: each enabled layer's scales,
/// offsets, balance factors and types, in order (FORCE_FP16_QUANT marked when `fp16`). Every
/// enabled layer must have its weight and activation parameters (the session's done phase).
[[nodiscard]] inline record_file record_of_layers(const std::vector<session_layer>& layers,
                                                  bool fp16) {
  record_file rec;
  for (const auto& l : layers) {
    if (!l.plan.quant_enable)
      continue;
    rec.records.push_back({l.desc.name, layer_record_of(*l.weight_params, *l.activation_params,
                                                        l.balance_factors, fp16)});
  }
  return rec;
}

}  // namespace detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
