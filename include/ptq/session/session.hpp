// The calibration session: the way an inference engine embeds ptq. It resolves the config for
// the engine's layers and runs the toolkit's phases in order (spec §2, §7):
//   1. Conv+BN fusion (at creation),
//   2. the DMQ pass: the engine feeds each balanced layer's input once (`feed_dmq`),
//   3. weight quantization of the fused, balanced weights (`quantize_weights`, ARQ), then the
//      AdaRound layers one at a time in order (`quantize_ada`, from samples the engine computes
//      with the earlier layers' quantized weights); afterwards the engine runs with `weight()` /
//      `bias()` / `balance_factors()`,
//   4. activation calibration: `batch_num` inputs per layer (`feed`), each layer finalized after
//      its last batch; then `record()`.
// A session is not thread-safe: call it from one thread (its kernels may use several).
#pragma once

#include <xtensor/xarray.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ptq/algorithms/ada.hpp"
#include "ptq/algorithms/arq.hpp"
#include "ptq/algorithms/conv_bn_fusion.hpp"
#include "ptq/algorithms/dispatch.hpp"
#include "ptq/algorithms/dmq.hpp"
#include "ptq/config/resolve.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/session/ada_layer.hpp"
#include "ptq/session/layer.hpp"
#include "ptq/session/record.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Signal-to-quantization-noise ratio of `q` against `x` in dB (inf when they are equal).
[[nodiscard]] inline double sqnr_db(const float* x, const float* q, std::size_t n) noexcept {
  double signal = 0.0;
  double noise = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - static_cast<double>(q[i]);
    signal += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    noise += d * d;
  }
  if (noise == 0.0)
    return std::numeric_limits<double>::infinity();
  if (signal == 0.0)
    return -std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal / noise);
}

/// Where a session is; reported to the progress callback.
enum class session_phase : std::uint8_t { fusion, dmq, weights, activations, done };

struct progress_event {
  session_phase phase = session_phase::fusion;
  std::string_view layer;  ///< the layer just handled
  std::size_t done = 0;    ///< steps of this phase finished
  std::size_t total = 0;   ///< steps of this phase
};

struct session_options {
  resolve_options resolve{};
  unsigned threads = 1;  ///< for the kernels that can use several; results do not depend on it
  /// The kernels every phase uses: the compile-time arch by default; a binary with per-ISA
  /// translation units passes `kernels::dispatch_kernel_set<kernels::x86_archs>()`.
  kernels::kernel_set kernels = kernels::default_kernels();
  std::function<void(const progress_event&)> on_progress;
  std::uint64_t ada_seed = 0;  ///< AdaRound minibatch seed (recorded by `ptq calibrate`)
  std::size_t ada_report_every = 100;
  /// AdaRound progress: the layer and its iteration, reconstruction and rounding losses.
  std::function<void(std::string_view, const ada_progress&)> on_ada_progress;
};

/// One layer's state in a session.
struct session_layer {
  layer_desc desc;                     ///< weights here are fused, balanced, fake-quantized
  resolved_layer plan;                 ///< the resolved config entry
  bool fused = false;                  ///< BatchNorm folded into weight/bias
  std::vector<float> balance_factors;  ///< DMQ factors (Cin), empty without DMQ
  std::optional<weight_quant_result> weight_params;
  std::optional<activation_quant_result> activation_params;
  std::size_t batches_seen = 0;
  std::optional<activation_observer> observer;
  /// 10·log10(Σw² / Σ(w − w_q)²) of the weight quantization, in dB (inf when exact).
  double weight_sqnr_db = 0.0;
  /// AdaRound layers: weights whose learned rounding differs from round-to-nearest.
  std::size_t ada_changed = 0;
};

class calibration_session {
 public:
  /// Resolves `config` for `layers`, checks their weights, and fuses Conv+BN. Errors: the
  /// config's resolution errors, and malformed layers (code E801, naming the layer).
  [[nodiscard]] static result<calibration_session> create(const amct_config& config,
                                                          std::vector<layer_desc> layers,
                                                          session_options options = {}) {
    std::vector<layer_info> infos;
    for (const auto& l : layers) {
      layer_info i;
      i.name = l.name;
      i.type = l.type;
      i.has_bias = l.bias.has_value();
      const auto cin = layer_input_channels(l);
      if (cin != 0)
        i.in_channels = static_cast<std::uint32_t>(cin);
      i.groups = static_cast<std::uint32_t>(l.conv.groups);
      infos.push_back(std::move(i));
    }
    auto plan = resolve_config(config, infos, options.resolve);
    std::vector<diagnostic> diags = plan.diagnostics();
    if (!plan)
      return result<calibration_session>(std::move(diags));
    calibration_session s;
    s.options_ = std::move(options);
    s.plan_ = plan.value();
    s.fp16_ = config.fakequant_precision_mode.has_value();
    for (auto& l : layers) {
      session_layer sl;
      sl.plan = *s.plan_.find(l.name);
      sl.desc = std::move(l);
      if (auto err = check_layer(sl.desc); !err.empty()) {
        diags.push_back({errc::session_layer_invalid, severity::error, err, {}, {}});
      }
      s.layers_.push_back(std::move(sl));
    }
    if (std::any_of(diags.begin(), diags.end(), is_error)) {
      return result<calibration_session>(std::move(diags));
    }
    s.fuse(diags);
    s.phase_ = session_phase::dmq;
    return result<calibration_session>(std::move(s), std::move(diags));
  }

  [[nodiscard]] session_phase phase() const noexcept { return phase_; }
  [[nodiscard]] const resolved_config& plan() const noexcept { return plan_; }
  [[nodiscard]] const std::vector<session_layer>& layers() const noexcept { return layers_; }
  [[nodiscard]] const session_layer* find(std::string_view name) const noexcept {
    for (const auto& l : layers_) {
      if (l.desc.name == name)
        return &l;
    }
    return nullptr;
  }

  /// Names of the layers whose input the DMQ pass needs (enabled layers with dmq_balancer).
  [[nodiscard]] std::vector<std::string> dmq_layers() const {
    std::vector<std::string> out;
    for (const auto& l : layers_) {
      if (needs_dmq(l))
        out.push_back(l.desc.name);
    }
    return out;
  }

  /// Phase 2: one input batch of a DMQ layer; computes its balance factors.
  [[nodiscard]] result<> feed_dmq(std::string_view name, const tensor_ref& input) {
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
    const auto op = l->desc.type;
    auto w = as_tensor_ref(l->desc.weight, l->desc.name + ".weight");
    auto act = input;
    if (act.name == "tensor")
      act.name = l->desc.name + " input";
    dmq_settings ds;
    ds.migration_strength = *l->plan.dmq_balancer_param;
    auto f = dmq_factors(act, w, op, l->desc.conv.groups, ds, options_.kernels);
    if (!f)
      return f.error();
    l->balance_factors = std::move(f).value();
    report(session_phase::dmq, l->desc.name, count_if([&](const session_layer& x) {
             return needs_dmq(x) && !x.balance_factors.empty();
           }),
           dmq_layers().size());
    return {};
  }

  /// Phase 3: balances every enabled layer's weights and quantizes those of the ARQ layers. Needs
  /// every DMQ layer fed. Afterwards `weight()` is the fake-quantized weight the engine must run
  /// with; the AdaRound layers (`ada_layers()`) keep their float (balanced) weight until
  /// `quantize_ada`, and the activation phase starts after the last of them.
  [[nodiscard]] result<> quantize_weights() {
    if (phase_ != session_phase::dmq)
      return fail("quantize_weights: the weights are already quantized");
    for (const auto& l : layers_) {
      if (needs_dmq(l) && l.balance_factors.empty()) {
        return fail("quantize_weights: layer '" + l.desc.name +
                    "' has dmq_balancer but its input was not fed (feed_dmq)");
      }
    }
    phase_ = session_phase::weights;
    const std::size_t total = count_if([](const session_layer& l) { return l.plan.quant_enable; });
    std::size_t done = 0;
    for (auto& l : layers_) {
      if (!l.plan.quant_enable)
        continue;
      if (auto st = quantize_layer_weights(l); !st) {
        phase_ = session_phase::dmq;
        return st;
      }
      if (!is_ada(l))
        report(session_phase::weights, l.desc.name, ++done, total);
    }
    if (ada_layers().empty())
      start_activations();
    return {};
  }

  /// The enabled layers whose weights AdaRound quantizes, in model order; after
  /// `quantize_weights`, those still to do.
  [[nodiscard]] std::vector<std::string> ada_layers() const {
    std::vector<std::string> out;
    for (const auto& l : layers_) {
      if (is_ada(l) && !l.weight_params)
        out.push_back(l.desc.name);
    }
    return out;
  }

  /// Phase 3, AdaRound (spec §5.4): learns the rounding of the next AdaRound layer, `name`, from
  /// its input samples `input` (dim 0 is the sample axis; Linear: every row of the last axis is
  /// a sample) computed by the engine with the earlier layers quantized. The target is the
  /// layer's float output through its activation on `float_input` (the input with every
  /// AdaRound layer in float), or on `input` when that is null. Inputs are divided by the DMQ
  /// factors here, as in `feed`.
  [[nodiscard]] result<> quantize_ada(std::string_view name, const tensor_ref& input,
                                      const tensor_ref* float_input = nullptr) {
    session_layer* l = nullptr;
    if (auto st = lookup(name, session_phase::weights, "quantize_ada", l); !st)
      return st;
    const auto pending_ada = ada_layers();
    if (!is_ada(*l) || pending_ada.empty())
      return fail(std::string(name) + ": not an AdaRound layer still to quantize");
    if (pending_ada.front() != name) {
      return fail("quantize_ada('" + std::string(name) +
                  "'): AdaRound layers go in model order; '" + pending_ada.front() + "' is next");
    }
    if (auto st = check_input(*l, input); !st)
      return st;
    if (float_input) {
      if (auto st = check_input(*l, *float_input); !st)
        return st;
      if (float_input->shape != input.shape) {
        return make_error(errc::shape_mismatch, std::string(name) + ": the float input " +
                                                    shape_string(float_input->shape) +
                                                    " and the input " + shape_string(input.shape) +
                                                    " differ in shape");
      }
    }
    ada_settings as = ada_settings_of(*l->plan.weight);
    as.seed = options_.ada_seed;
    as.threads = options_.threads;
    as.report_every = options_.ada_report_every;
    if (options_.on_ada_progress) {
      as.on_progress = [this, l](const ada_progress& e) {
        options_.on_ada_progress(l->desc.name, e);
      };
    }
    auto r =
        ada_quantize_layer(l->desc, l->balance_factors, input, float_input, as, options_.kernels);
    if (!r)
      return r.error();
    auto& res = r.value();
    l->weight_sqnr_db = sqnr_db(l->desc.weight.data(), res.weight.data(), res.weight.size());
    std::copy(res.weight.begin(), res.weight.end(), l->desc.weight.begin());
    l->ada_changed = res.changed;
    l->weight_params = std::move(res.params);
    const std::size_t total = count_if([](const session_layer& x) { return x.plan.quant_enable; });
    const std::size_t done =
        count_if([](const session_layer& x) { return x.weight_params.has_value(); });
    report(session_phase::weights, l->desc.name, done, total);
    if (pending_ada.size() == 1)
      start_activations();
    return {};
  }

 private:
  static bool is_ada(const session_layer& l) {
    return l.plan.quant_enable && l.plan.weight && l.plan.weight->algo == weight_algo::ada &&
           supports_ada_round(l.desc.type);
  }

  void start_activations() {
    for (auto& l : layers_) {
      if (!l.plan.quant_enable)
        continue;
      activation_settings as;
      const auto& a = l.plan.activation;
      as.algo = a.algo;
      as.ifmr.search_range_start = a.search_range_start;
      as.ifmr.search_range_end = a.search_range_end;
      as.ifmr.search_step = a.search_step;
      as.ifmr.max_percentile = a.max_percentile;
      as.ifmr.min_percentile = a.min_percentile;
      as.ifmr.bits = static_cast<int>(a.num_bits);
      as.ifmr.asymmetric = a.asymmetric;
      as.ifmr.threads = options_.threads;
      as.hfmg.num_of_bins = a.num_of_bins;
      as.hfmg.bits = static_cast<int>(a.num_bits);
      as.hfmg.asymmetric = a.asymmetric;
      as.hfmg.threads = options_.threads;
      l.observer.emplace(as, options_.kernels, l.desc.name + " input");
    }
    phase_ = session_phase::activations;
  }

 public:
  /// The weight the engine runs with: fused, balanced, fake-quantized (after phase 3).
  [[nodiscard]] const xt::xarray<float>& weight(std::string_view name) const {
    return find(name)->desc.weight;
  }

  /// Phase 4: one calibration batch of a layer's input (the engine's float activations). The
  /// session divides it by the DMQ factors and observes it; after `batch_num` batches the layer
  /// is finalized.
  [[nodiscard]] result<> feed(std::string_view name, const tensor_ref& input) {
    session_layer* l = nullptr;
    // Once every layer is done, a further batch is still "more than batch_num" for its layer.
    const session_phase want =
        phase_ == session_phase::done ? session_phase::done : session_phase::activations;
    if (auto st = lookup(name, want, "feed", l); !st)
      return st;
    if (!l->plan.quant_enable) {
      return fail(std::string(name) + ": the layer is skipped by the config (quant_enable false)");
    }
    if (l->batches_seen >= plan_.batch_num) {
      return fail(std::string(name) + ": already has its " + std::to_string(plan_.batch_num) +
                  " batch(es) (batch_num)");
    }
    if (auto st = check_input(*l, input); !st)
      return st;
    result<> st;
    if (!l->balance_factors.empty()) {
      std::vector<float> scaled(input.data, input.data + input.size());
      st = dmq_apply_to_activation(scaled.data(), input.shape, l->desc.type, l->balance_factors);
      if (st)
        st = l->observer->observe(scaled.data(), scaled.size());
    } else {
      st = l->observer->observe(input.data, input.size());
    }
    if (!st)
      return st;
    if (++l->batches_seen == plan_.batch_num) {
      auto r = l->observer->finalize();
      if (!r)
        return r.error();
      l->activation_params = fp16_ ? with_fp16_scale(r.value()) : r.value();
      l->observer.reset();
    }
    const std::size_t total = count_if([](const session_layer& x) { return x.plan.quant_enable; });
    const std::size_t done =
        count_if([](const session_layer& x) { return x.activation_params.has_value(); });
    report(session_phase::activations, l->desc.name, done, total);
    if (done == total)
      phase_ = session_phase::done;
    return {};
  }

  /// Layers still waiting for activation batches.
  [[nodiscard]] std::vector<std::string> pending() const {
    std::vector<std::string> out;
    for (const auto& l : layers_) {
      if (l.plan.quant_enable && !l.activation_params)
        out.push_back(l.desc.name);
    }
    return out;
  }

  /// The toolkit's record (spec §6) once every enabled layer is calibrated.
  [[nodiscard]] result<record_file> record() const {
    if (phase_ != session_phase::done) {
      const auto p = pending();
      return make_error(errc::no_data, "record: layer '" +
                                           (p.empty() ? std::string("?") : p.front()) +
                                           "' has not seen its " + std::to_string(plan_.batch_num) +
                                           " batch(es) yet");
    }
    record_file rec;
    for (const auto& l : layers_) {
      if (!l.plan.quant_enable)
        continue;
      layer_record r;
      r.scale_d = l.activation_params->scale;
      r.offset_d = l.activation_params->offset;
      r.scale_w = l.weight_params->scale;
      r.offset_w = l.weight_params->offset;
      r.tensor_balance_factor = l.balance_factors;
      r.act_type = "INT" + std::to_string(l.activation_params->bits);
      r.wts_type = "INT" + std::to_string(l.weight_params->bits);
      if (fp16_)
        r.fakequant_precision_mode = "FORCE_FP16_QUANT";
      rec.records.push_back({l.desc.name, std::move(r)});
    }
    return rec;
  }

 private:
  calibration_session() = default;

  static result<> fail(std::string message) {
    return make_error(errc::invalid_argument, std::move(message));
  }

  template <class Pred>
  std::size_t count_if(Pred p) const {
    return static_cast<std::size_t>(std::count_if(layers_.begin(), layers_.end(), p));
  }

  static bool needs_dmq(const session_layer& l) {
    return l.plan.quant_enable && l.plan.dmq_balancer_param.has_value();
  }

  void report(session_phase ph, std::string_view layer, std::size_t done, std::size_t total) {
    if (options_.on_progress)
      options_.on_progress(progress_event{ph, layer, done, total});
  }

  result<> lookup(std::string_view name, session_phase want, const char* what,
                  session_layer*& out) {
    for (auto& l : layers_) {
      if (l.desc.name == name)
        out = &l;
    }
    if (!out)
      return fail(std::string(what) + ": no layer named '" + std::string(name) + "'");
    if (phase_ != want) {
      static const char* const names[] = {"fusion", "DMQ", "weight quantization",
                                          "activation calibration", "done"};
      return fail(std::string(what) + "('" + std::string(name) + "'): the session is in the " +
                  names[static_cast<int>(phase_)] + " phase, not the " +
                  names[static_cast<int>(want)] + " phase");
    }
    return {};
  }

  // Shape checks of a layer description; empty when fine.
  static std::string check_layer(const layer_desc& l) {
    const std::string at = "layer '" + l.name + "': ";
    if (l.type == layer_type::avg_pool2d)
      return {};
    const auto op = l.type;
    std::vector<std::size_t> shape(l.weight.shape().begin(), l.weight.shape().end());
    if (auto g = output_channels(shape, op, l.conv.groups, l.name + ".weight"); !g) {
      return at + g.error().message;
    }
    if (l.conv.padding_mode != "zeros") {
      return at + "padding_mode '" + l.conv.padding_mode +
             "' is not quantized by the toolkit (only 'zeros')";
    }
    const auto cout = layer_output_channels(l);
    if (l.bias && l.bias->size() != cout) {
      return at + "bias has " + std::to_string(l.bias->size()) + " values; Cout is " +
             std::to_string(cout);
    }
    if (l.batch_norm && !supports_bn_fusion(l.type)) {
      return at + "a BatchNorm after a " + std::string(to_string(l.type)) +
             " is not fused by the toolkit; run it in the engine and leave batch_norm empty";
    }
    return {};
  }

  result<> check_input(const session_layer& l, const tensor_ref& x) const {
    const std::string at = l.desc.name + " input " + shape_string(x.shape) + ": ";
    if (x.size() == 0)
      return make_error(errc::empty_tensor, at + "empty tensor");
    if (l.desc.type == layer_type::avg_pool2d) {
      if (x.shape.size() != 4)
        return make_error(errc::shape_mismatch, at + "AvgPool2d takes NCHW input");
      return {};
    }
    const std::size_t cin = layer_input_channels(l.desc);
    const bool last = l.desc.type == layer_type::linear;
    const std::size_t got = last ? x.shape.back() : (x.shape.size() >= 2 ? x.shape[1] : 0);
    if (got != cin) {
      return make_error(errc::shape_mismatch, at + "has " + std::to_string(got) +
                                                  " input channels (axis " +
                                                  (last ? std::string("-1") : std::string("1")) +
                                                  "); the layer takes " + std::to_string(cin));
    }
    return {};
  }

  void fuse(std::vector<diagnostic>& diags) {
    std::size_t done = 0;
    const std::size_t total =
        count_if([](const session_layer& l) { return l.desc.batch_norm.has_value(); });
    for (auto& l : layers_) {
      if (!l.desc.batch_norm)
        continue;
      const bool skipped =
          std::find(plan_.skip_fusion_layers.begin(), plan_.skip_fusion_layers.end(),
                    l.desc.name) != plan_.skip_fusion_layers.end();
      if (plan_.do_fusion && !skipped) {
        const auto cout = layer_output_channels(l.desc);
        std::vector<float> w(l.desc.weight.begin(), l.desc.weight.end());
        std::vector<float> b;
        if (l.desc.bias)
          b.assign(l.desc.bias->begin(), l.desc.bias->end());
        auto f = fuse_conv_bn(w, b, cout, *l.desc.batch_norm, l.desc.name);
        if (!f) {
          diags.push_back(
              {errc::session_layer_invalid, severity::error, f.error().message, {}, {}});
        } else if (!is_finite(f.value())) {
          diags.push_back({errc::fusion_skipped,
                           severity::warning,
                           "layer '" + l.desc.name +
                               "': Conv+BN fusion skipped, the fused values would not be finite",
                           {},
                           {}});
        } else {
          std::copy(f.value().weight.begin(), f.value().weight.end(), l.desc.weight.begin());
          l.desc.bias = xt::xarray<float>::from_shape({cout});
          std::copy(f.value().bias.begin(), f.value().bias.end(), l.desc.bias->begin());
          l.desc.batch_norm.reset();
          l.fused = true;
        }
      }
      report(session_phase::fusion, l.desc.name, ++done, total);
    }
  }

  result<> quantize_layer_weights(session_layer& l) {
    if (l.desc.type == layer_type::avg_pool2d) {
      l.weight_params = weight_quant_result{{1.0f}, {0}, 8};  // spec §5.8
      return {};
    }
    const auto op = l.desc.type;
    std::vector<std::size_t> shape(l.desc.weight.shape().begin(), l.desc.weight.shape().end());
    if (!l.balance_factors.empty()) {
      if (auto st = dmq_apply_to_weight(l.desc.weight.data(), shape, op, l.desc.conv.groups,
                                        l.balance_factors);
          !st) {
        return st;
      }
    }
    if (is_ada(l))
      return {};  // learned later by quantize_ada, from the engine's samples
    weight_settings ws;
    if (l.plan.weight) {
      ws.algo = l.plan.weight->algo;
      ws.arq.bits = static_cast<int>(l.plan.weight->num_bits);
      ws.arq.channel_wise = l.plan.weight->channel_wise;
    } else {  // ADA requested where AdaRound does not apply: ARQ defaults (spec §4.3)
      ws.arq.channel_wise = supports_channel_wise(l.desc.type);
    }
    auto p = calibrate_weights(ws, as_tensor_ref(l.desc.weight, l.desc.name + ".weight"), op,
                               l.desc.conv.groups, options_.kernels);
    if (!p)
      return p.error();
    const std::vector<float> before(l.desc.weight.begin(), l.desc.weight.end());
    if (auto st = arq_fake_quantize(l.desc.weight.data(), shape, op, l.desc.conv.groups, p.value(),
                                    options_.kernels);
        !st) {
      return st;
    }
    l.weight_sqnr_db = sqnr_db(before.data(), l.desc.weight.data(), before.size());
    l.weight_params = std::move(p).value();
    return {};
  }

  session_options options_;
  resolved_config plan_;
  bool fp16_ = false;
  session_phase phase_ = session_phase::fusion;
  std::vector<session_layer> layers_;
};

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
