// The bodies of calibration_session's phase calls (calibration_session.hpp declares them).
// Compiled once into `ptq::session` (src/session/), which `ptq::ptq` links by default, so a TU
// that uses the session does not instantiate every algorithm pair of it again; a program built
// from the headers alone (PTQ_SESSION_COMPILED unset) gets them here as inline functions,
// included by calibration_session.hpp.
// Depends on: core and config.
#pragma once

#include <algorithm>
#include <cfloat>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ptq/config/resolve.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/session/calibration_session.hpp"

#if !defined(PTQ_SESSION_INLINE)
#define PTQ_SESSION_INLINE inline
#endif

// In src/session/calibration_session.cpp PTQ_SESSION_INLINE is empty: there these are the one,
// external definitions, which is the point (everywhere else they are inline).
// NOLINTBEGIN(misc-definitions-in-headers)
namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

PTQ_SESSION_INLINE result<calibration_session> calibration_session::create(
    const amct_config& config, std::vector<layer_desc> layers, session_options options) {
  if (auto st = check_session_options(options); !st)
    return st.error();
  std::vector<layer_info> infos;
  infos.reserve(layers.size());
  for (const auto& l : layers)
    infos.push_back(layer_info_of(l));
  auto plan = resolve_config(config, infos, options.resolve);
  std::vector<error> diags = plan.diagnostics();
  if (!plan)
    return result<calibration_session>(std::move(diags));
  return build(std::move(plan).value(), std::move(layers), std::move(options), std::move(diags));
}

PTQ_SESSION_INLINE result<calibration_session> calibration_session::create(
    resolved_config plan, std::vector<layer_desc> layers, session_options options) {
  if (auto st = check_session_options(options); !st)
    return st.error();
  const detail::name_index<layer_desc> named(layers, &layer_desc::name);
  for (const auto& p : plan.layers) {
    if (named.find(p.name) == nullptr) {
      return make_error(errc::unknown_layer, "the detailed config names layer '" + p.name +
                                                 "', which is not among the session's layers");
    }
  }
  // A layer the detailed config leaves out is not quantized, as the toolkit does.
  const detail::name_index<resolved_layer> plans(plan.layers, &resolved_layer::name);
  std::vector<resolved_layer> absent;
  for (const auto& l : layers) {
    if (plans.find(l.name) == nullptr) {
      resolved_layer off;
      off.name = l.name;
      off.quant_enable = false;
      absent.push_back(std::move(off));
    }
  }
  plan.layers.insert(plan.layers.end(), absent.begin(), absent.end());
  std::sort(plan.layers.begin(), plan.layers.end(),
            [](const resolved_layer& a, const resolved_layer& b) { return a.name < b.name; });
  return build(std::move(plan), std::move(layers), std::move(options), {});
}

PTQ_SESSION_INLINE result<calibration_session> calibration_session::build(
    resolved_config plan, std::vector<layer_desc> layers, session_options options,
    std::vector<error> diags) {
  calibration_session s;
  s.options_ = std::move(options);
  s.plan_ = std::move(plan);
  s.fp16_ = s.plan_.fakequant_precision_mode.has_value();
  const detail::name_index<resolved_layer> plans(s.plan_.layers, &resolved_layer::name);
  for (auto& l : layers) {
    session_layer sl;
    sl.plan = *plans.find(l.name);
    sl.plan.type = l.type;
    sl.desc = std::move(l);
    if (auto st = check_layer_desc(sl.desc); !st) {
      diags.push_back(st.error());
    } else if (auto taken = detail::take_layer_tensors(sl); !taken) {
      diags.push_back(taken.error());
    }
    if (sl.plan.quant_enable)
      sl.calibrator = make_layer_calibrator(sl.plan, s.options_.threads, s.options_.kernels);
    s.layers_.push_back(std::move(sl));
  }
  s.index_layers();
  if (std::any_of(diags.begin(), diags.end(), is_error)) {
    return result<calibration_session>(std::move(diags));
  }
  s.fuse(diags);
  if (std::any_of(diags.begin(), diags.end(), is_error)) {
    return result<calibration_session>(std::move(diags));
  }
  s.phase_ = session_phase::dmq;
  return {std::move(s), std::move(diags)};
}

PTQ_SESSION_INLINE result<> calibration_session::feed_dmq_factors(std::string_view name,
                                                                  std::vector<float> factors) {
  session_layer* l = nullptr;
  if (auto st = lookup(name, session_phase::dmq, "feed_dmq_factors", l); !st)
    return st;
  if (!needs_dmq(*l)) {
    return fail(std::string(name) +
                ": the layer has no dmq_balancer; feed it in the activation phase");
  }
  if (!l->balance_factors.empty())
    return fail(std::string(name) + ": the DMQ factors were already given");
  const std::size_t cin = layer_input_channels(l->desc);
  if (factors.size() != cin) {
    return make_error(errc::session_input_invalid,
                      std::string(name) + ": " + std::to_string(factors.size()) +
                          " DMQ factors; the layer has " + std::to_string(cin) + " input channels");
  }
  for (const float f : factors) {
    if (!(f >= FLT_EPSILON && f <= 1.0f / FLT_EPSILON)) {
      return make_error(
          errc::session_input_invalid,
          std::string(name) + ": DMQ factors must be in [FLT_EPSILON, 1/FLT_EPSILON]");
    }
  }
  l->balance_factors = std::move(factors);
  report(session_phase::dmq, l->desc.name, ++dmq_done_, dmq_total_);
  return {};
}

PTQ_SESSION_INLINE result<> calibration_session::feed_dmq(std::string_view name,
                                                          const tensor_view& input) {
  session_layer* l = nullptr;
  if (auto st = lookup(name, session_phase::dmq, "feed_dmq", l); !st)
    return st;
  if (!needs_dmq(*l)) {
    return fail(std::string(name) +
                ": the layer has no dmq_balancer; feed it in the activation phase");
  }
  if (!l->balance_factors.empty()) {
    return fail(std::string(name) +
                ": the DMQ input was already fed (the factors come from one batch)");
  }
  if (auto st = detail::compute_balance_factors(*l, input, options_.kernels); !st)
    return st;
  report(session_phase::dmq, l->desc.name, ++dmq_done_, dmq_total_);
  return {};
}

PTQ_SESSION_INLINE result<> calibration_session::quantize_weights() {
  if (phase_ != session_phase::dmq) {
    return fail("quantize_weights: the session is in the " + std::string(to_string(phase_)) +
                " phase; the weights are quantized once, in the DMQ phase");
  }
  for (const auto& l : layers_) {
    if (needs_dmq(l) && l.balance_factors.empty()) {
      return fail("quantize_weights: layer '" + l.desc.name +
                  "' has dmq_balancer but its input was not fed (feed_dmq)");
    }
  }
  // All or nothing without a copy of the model: every layer is checked and its parameters
  // computed first, and only then are the weights changed, so a failure leaves the session as
  // it was (still in the DMQ phase, weights not balanced) and the engine can report it without
  // a half-quantized model.
  std::vector<std::optional<weight_quant_result>> params(layers_.size());
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    if (!layers_[i].plan.quant_enable)
      continue;
    auto p = detail::plan_layer_weights(layers_[i], scratch_);
    if (!p)
      return p.error();
    params[i] = std::move(p).value();
  }
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    session_layer& l = layers_[i];
    if (!l.plan.quant_enable)
      continue;
    if (auto st = detail::apply_layer_weights(l, std::move(params[i]), scratch_); !st)
      return st;
    if (!learns_from_samples(l))
      report(session_phase::weights, l.desc.name, ++weights_done_, enabled_);
  }
  phase_ = session_phase::weights;
  if (ada_layers().empty())
    phase_ = session_phase::activations;
  return {};
}

PTQ_SESSION_INLINE result<> calibration_session::quantize_ada(std::string_view name,
                                                              const tensor_view& input,
                                                              const tensor_view* float_input) {
  session_layer* l = nullptr;
  if (auto st = lookup(name, session_phase::weights, "quantize_ada", l); !st)
    return st;
  const auto pending_ada = ada_layers();
  if (!learns_from_samples(*l) || l->weight_params)
    return fail(std::string(name) + ": not an AdaRound layer still to quantize");
  if (pending_ada.front() != name) {
    return fail("quantize_ada('" + std::string(name) + "'): AdaRound layers go in model order; '" +
                pending_ada.front() + "' is next");
  }
  if (auto st = detail::quantize_ada_layer(*l, input, float_input, options_); !st)
    return st;
  report(session_phase::weights, l->desc.name, ++weights_done_, enabled_);
  if (pending_ada.size() == 1)
    phase_ = session_phase::activations;
  return {};
}

PTQ_SESSION_INLINE result<> calibration_session::feed(std::string_view name,
                                                      const tensor_view& input) {
  return feed_batch(name, input);
}

PTQ_SESSION_INLINE result<std::string> calibration_session::shard_states() const {
  if (auto st = check_exchange("shard_states"); !st)
    return st.error();
  return detail::pack_shard_states(layers_, options_.activation.shard, plan_.batch_num,
                                   shard_pass_);
}

PTQ_SESSION_INLINE result<std::string> calibration_session::merge_shard_states(
    const std::vector<std::string>& all) const {
  if (auto st = check_exchange("merge_shard_states"); !st)
    return st.error();
  return detail::merge_shard_states(layers_, options_.activation.shard, shard_pass_, all, fp16_,
                                    options_.kernels);
}

PTQ_SESSION_INLINE result<> calibration_session::adopt_shard_states(std::string_view merged) {
  if (auto st = check_exchange("adopt_shard_states"); !st)
    return st;
  if (auto st = detail::adopt_shard_states(layers_, shard_pass_, merged, options_.kernels); !st)
    return st;
  if (++shard_pass_ <= 2)
    return {};
  std::size_t done = 0;
  for (const auto& l : layers_) {
    if (l.plan.quant_enable)
      report(session_phase::activations, l.desc.name, ++done, enabled_);
  }
  phase_ = session_phase::done;
  return {};
}

PTQ_SESSION_INLINE result<record_file> calibration_session::record() const {
  if (phase_ != session_phase::done) {
    const auto p = pending();
    return fail("record: the session is in the " + std::string(to_string(phase_)) +
                " phase; layer '" + (p.empty() ? std::string("?") : p.front()) +
                "' has not seen its " + std::to_string(plan_.batch_num) + " batch(es) yet");
  }
  return detail::record_of_layers(layers_, fp16_);
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
// NOLINTEND(misc-definitions-in-headers)
