// The calibration session: the way an inference engine embeds ptq. It resolves the config for
// the engine's layers and runs the toolkit's phases in order (docs/calibrate.md):
//   1. Conv+BN fusion (at creation),
//   2. the DMQ pass: the engine feeds each balanced layer's input once (`feed_dmq`),
//   3. weight quantization of the fused, balanced weights (`quantize_weights`, ARQ), then the
//      AdaRound layers one at a time in order (`quantize_ada`, from samples the engine computes
//      with the earlier layers' quantized weights); afterwards the engine runs with `weight()`
//      and each layer's `balance_factors`,
//   4. activation calibration: `batch_num` inputs per layer (`feed`), each layer finalized after
//      its last batch; then `record()`. In the bounded and sharded activation modes
//      (`session_options::activation`) the engine feeds the same batches twice
//      (`activation_passes()`), bounded_activations.hpp, sharded_activations.hpp.
// Every call that can fail returns a result: E802 for a call out of order or an unknown layer,
// E803 for an input tensor that does not fit its layer, a numeric code (9xx) for bad values;
// each message names the layer. The per-layer work is in phases.hpp, the checks in checks.hpp.
// Every tensor comes as a tensor_view (core/tensor_view.hpp): float32, float16 or bfloat16, in
// any strides; the weights are read at create into the session's working memory, or quantized
// where they lie when the engine says so (layer_desc::weight_out).
// A session is not thread-safe: call it from one thread (its kernels may use several).
// Depends on: core, detail, config and algorithms.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ptq/algorithms/layer_calibrator.hpp"
#include "ptq/config/resolve.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/tensor_view.hpp"
#include "ptq/detail/find.hpp"
#include "ptq/session/bounded_activations.hpp"
#include "ptq/session/checks.hpp"
#include "ptq/session/layer.hpp"
#include "ptq/session/observe_batch.hpp"
#include "ptq/session/phases.hpp"
#include "ptq/session/record.hpp"
#include "ptq/session/session_layer.hpp"
#include "ptq/session/session_options.hpp"
#include "ptq/session/sharded_activations.hpp"

// 1 when the program links `ptq::session` (CMake's ptq::ptq does): the phase calls are defined
// there, compiled once; 0 (headers alone): calibration_session_impl.hpp defines them inline.
#if !defined(PTQ_SESSION_COMPILED)
#define PTQ_SESSION_COMPILED 0
#endif

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

class calibration_session {
 public:
  /// Move-only: its layers hold their working tensors (and may point at the engine's).
  calibration_session(calibration_session&&) = default;
  calibration_session& operator=(calibration_session&&) = default;
  calibration_session(const calibration_session&) = delete;
  calibration_session& operator=(const calibration_session&) = delete;
  ~calibration_session() = default;

  /// Resolves `config` for `layers`, checks their weights, takes them into the session's
  /// working memory (or the engine's weight_out), and fuses Conv+BN. Errors: the config's
  /// resolution errors, and malformed layers (code E801, naming the layer). A failed create
  /// changes no weight.
  [[nodiscard]] static result<calibration_session> create(const amct_config& config,
                                                          std::vector<layer_desc> layers,
                                                          session_options options = {});
  /// The same from a detailed JSON config already resolved (`try_read_quant_config`, the
  /// toolkit's create_quant_config output): a layer it leaves out is not quantized; one it
  /// names that `layers` lack is E401.
  [[nodiscard]] static result<calibration_session> create(resolved_config plan,
                                                          std::vector<layer_desc> layers,
                                                          session_options options = {});

  [[nodiscard]] session_phase phase() const noexcept { return phase_; }
  [[nodiscard]] const resolved_config& plan() const noexcept { return plan_; }
  [[nodiscard]] const std::vector<session_layer>& layers() const noexcept { return layers_; }
  /// The layer named `name`, or null.
  [[nodiscard]] const session_layer* find(std::string_view name) const {
    const auto it = index_.find(std::string(name));
    return it == index_.end() ? nullptr : &layers_[it->second];
  }

  /// Names of the layers whose input the DMQ pass needs (enabled layers with dmq_balancer).
  [[nodiscard]] std::vector<std::string> dmq_layers() const {
    return names_if([](const session_layer& l) { return needs_dmq(l); });
  }

  /// Phase 2: one input batch of a DMQ layer; computes its balance factors.
  [[nodiscard]] result<> feed_dmq(std::string_view name, const tensor_view& input);

  /// Phase 2 from factors computed before (a record's tensor_balance_factor, as the toolkit's
  /// quantize_model reads quantize_preprocess's): one per input channel, each in
  /// [FLT_EPSILON, 1/FLT_EPSILON] (E803 otherwise).
  [[nodiscard]] result<> feed_dmq_factors(std::string_view name, std::vector<float> factors);

  /// Phase 3: balances every enabled layer's weights and quantizes those of the ARQ layers. Needs
  /// every DMQ layer fed. Afterwards `weight()` is the fake-quantized weight the engine must run
  /// with; the AdaRound layers (`ada_layers()`) keep their float (balanced) weight until
  /// `quantize_ada`, and the activation phase starts after the last of them.
  [[nodiscard]] result<> quantize_weights();

  /// The enabled layers whose weights AdaRound quantizes, in model order; after
  /// `quantize_weights`, those still to do.
  [[nodiscard]] std::vector<std::string> ada_layers() const {
    return names_if(
        [](const session_layer& l) { return learns_from_samples(l) && !l.weight_params; });
  }

  /// Phase 3, AdaRound (docs/ada.md): learns the rounding of the next AdaRound layer, `name`, from
  /// its input samples `input` (dim 0 is the sample axis; Linear: every row of the last axis is
  /// a sample) computed by the engine with the earlier layers quantized. The target is the
  /// layer's float output through its activation on `float_input` (the input with every
  /// AdaRound layer in float), or on `input` when that is null. Inputs are divided by the DMQ
  /// factors here, as in `feed`.
  [[nodiscard]] result<> quantize_ada(std::string_view name, const tensor_view& input,
                                      const tensor_view* float_input = nullptr);

  /// The weight the engine runs with (float32, C order, at the layer's weight_out): fused,
  /// balanced, fake-quantized (after phase 3). E802 for an unknown layer or an AvgPool2d.
  [[nodiscard]] result<tensor_view> weight(std::string_view name) const {
    const session_layer* l = find(name);
    if (!l)
      return fail("weight: no layer named '" + std::string(name) + "'");
    if (l->desc.type == layer_type::avg_pool2d)
      return fail("weight: layer '" + std::string(name) + "' is an AvgPool2d, it has no weight");
    return l->desc.weight;
  }
  /// The bias the engine runs with (float32; fused when the layer's BatchNorm was), or none.
  /// E802 for an unknown layer.
  [[nodiscard]] result<std::optional<tensor_view>> bias(std::string_view name) const {
    const session_layer* l = find(name);
    if (!l)
      return fail("bias: no layer named '" + std::string(name) + "'");
    return l->desc.bias;
  }

  /// Phase 4: one calibration batch of a layer's input (the engine's float activations). The
  /// session divides it by the DMQ factors and observes it; after `batch_num` batches the layer
  /// is finalized.
  /// An input that is not float32 in C order (float16 or bfloat16, mapped from a file, say; a
  /// strided tensor) gives the same numbers and errors as its float32 values: it is converted a
  /// block at a time into the observer, or, in the bounded mode and when sharded, into one
  /// buffer the session reuses.
  [[nodiscard]] result<> feed(std::string_view name, const tensor_view& input);

  /// How often the engine feeds each layer's batch_num batches: 1, or 2 in the bounded memory
  /// mode and when sharded (the same batches again, in the same order).
  [[nodiscard]] std::size_t activation_passes() const noexcept {
    return options_.activation.two_passes() ? 2 : 1;
  }

  /// Sharded (activation_mode::kind::sharded; exchange_shard_states in shard_exchange.hpp does the
  /// three steps): this rank's states, once it fed its batches of every layer in this pass.
  [[nodiscard]] result<std::string> shard_states() const;

  /// Sharded, rank 0: merges every rank's shard_states (all[r] from rank r) into what every
  /// rank adopts.
  [[nodiscard]] result<std::string> merge_shard_states(const std::vector<std::string>& all) const;

  /// Sharded, every rank: adopts rank 0's merge; after pass 1 pass 2 starts, after pass 2 the
  /// session is done (every rank has the record).
  [[nodiscard]] result<> adopt_shard_states(std::string_view merged);

  /// Layers still waiting for activation batches.
  [[nodiscard]] std::vector<std::string> pending() const {
    return names_if(
        [](const session_layer& l) { return l.plan.quant_enable && !l.activation_params; });
  }

  /// The toolkit's record (docs/calibrate.md) once every enabled layer is calibrated (E802 before).
  [[nodiscard]] result<record_file> record() const;

 private:
  calibration_session() = default;

  /// Both create()s from here: the layers with their plan entries, checked, taken and fused.
  [[nodiscard]] static result<calibration_session> build(resolved_config plan,
                                                         std::vector<layer_desc> layers,
                                                         session_options options,
                                                         std::vector<error> diags);

  static error fail(std::string message) {
    return make_error(errc::session_call_invalid, std::move(message));
  }

  result<> check_exchange(const char* what) const {
    if (!options_.activation.is_sharded()) {
      return fail(std::string(what) +
                  ": the session is not sharded (session_options::activation is not "
                  "activation_mode::kind::sharded)");
    }
    if (phase_ != session_phase::activations) {
      return fail(std::string(what) + ": the session is in the " + std::string(to_string(phase_)) +
                  " phase, not the activation calibration phase");
    }
    return {};
  }

  void index_layers() {
    index_.reserve(layers_.size());
    for (std::size_t i = 0; i < layers_.size(); ++i)
      index_.emplace(layers_[i].desc.name, i);
    enabled_ = count_if([](const session_layer& l) { return l.plan.quant_enable; });
    dmq_total_ = count_if([](const session_layer& l) { return needs_dmq(l); });
  }

  template <class Pred>
  std::size_t count_if(Pred p) const {
    return static_cast<std::size_t>(std::count_if(layers_.begin(), layers_.end(), p));
  }

  template <class Pred>
  std::vector<std::string> names_if(Pred p) const {
    std::vector<std::string> out;
    for (const auto& l : layers_) {
      if (p(l))
        out.push_back(l.desc.name);
    }
    return out;
  }

  void report(session_phase ph, std::string_view layer, std::size_t done, std::size_t total) const {
    if (options_.on_progress)
      options_.on_progress(progress_event{ph, layer, done, total});
  }

  result<> lookup(std::string_view name, session_phase want, const char* what,
                  session_layer*& out) {
    if (const auto it = index_.find(std::string(name)); it != index_.end())
      out = &layers_[it->second];
    if (!out)
      return fail(std::string(what) + ": no layer named '" + std::string(name) + "'");
    if (phase_ != want) {
      return fail(std::string(what) + "('" + std::string(name) + "'): the session is in the " +
                  std::string(to_string(phase_)) + " phase, not the " +
                  std::string(to_string(want)) + " phase");
    }
    return {};
  }

  [[nodiscard]] result<> feed_batch(std::string_view name, const tensor_view& input) {
    session_layer* l = nullptr;
    // Once every layer is done, a further batch is still "more than batch_num" for its layer.
    const session_phase want =
        phase_ == session_phase::done ? session_phase::done : session_phase::activations;
    if (auto st = lookup(name, want, "feed", l); !st)
      return st;
    if (!l->plan.quant_enable) {
      return fail(std::string(name) + ": the layer is skipped by the config (quant_enable false)");
    }
    const bool sharded = options_.activation.is_sharded();
    const std::size_t batches =
        sharded ? shard_batch_count(options_.activation.shard, plan_.batch_num) : plan_.batch_num;
    if (l->batches_seen >= activation_passes() * batches && batches != 0) {
      return fail(std::string(name) + ": already has its " + std::to_string(batches) +
                  " batch(es) (" + (sharded ? "of this rank" : "batch_num") + ")" +
                  (activation_passes() == 2 ? " twice" : ""));
    }
    const bool was_final = l->activation_params.has_value();
    if (auto st = detail::observe_session_batch(
            *l, input, batch_context{options_, plan_.batch_num, fp16_, scratch_, converted_});
        !st)
      return st;
    if (sharded)  // sharded layers are finalized by the last exchange
      return {};
    // Progress in batches: every enabled layer's batches, however they are interleaved.
    ++batches_fed_;
    const std::size_t per_layer = activation_passes() * batches;
    if (options_.on_progress) {
      options_.on_progress(progress_event{session_phase::activations, l->desc.name, batches_fed_,
                                          enabled_ * per_layer, l->batches_seen, per_layer});
    }
    if (!was_final && l->activation_params.has_value() && ++layers_final_ == enabled_)
      phase_ = session_phase::done;
    return {};
  }

  // Every layer's fusion is planned before any weight changes (a failure changes none).
  // Reports only the layers it fuses: one in skip_fusion_layers is no fusion step.
  void fuse(std::vector<error>& diags) {
    std::vector<std::optional<conv_bn_factors>> factors(layers_.size());
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      auto f = detail::plan_fusion(layers_[i], plan_, diags);
      if (!f) {
        diags.push_back(f.error());
      } else {
        factors[i] = std::move(f).value();
      }
    }
    if (std::any_of(diags.begin(), diags.end(), is_error))
      return;
    std::size_t done = 0;
    const std::size_t total =
        count_if([&](const session_layer& l) { return detail::fusion_wanted(l, plan_); });
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      if (!detail::fusion_wanted(layers_[i], plan_))
        continue;
      if (factors[i])
        detail::apply_fusion(layers_[i], *factors[i]);
      report(session_phase::fusion, layers_[i].desc.name, ++done, total);
    }
  }

  session_options options_;
  resolved_config plan_;
  bool fp16_ = false;
  session_phase phase_ = session_phase::fusion;
  int shard_pass_ = 1;  ///< sharded: the activation pass being fed (1, 2), then 3
  std::vector<session_layer> layers_;
  /// Built once: every lookup by name and every progress count is O(1), so feeding a model's
  /// layers is linear in them.
  std::unordered_map<std::string, std::size_t> index_;  ///< layer name -> position in layers_
  std::size_t enabled_ = 0;                             ///< layers with quant_enable
  std::size_t dmq_total_ = 0;                           ///< layers the DMQ pass feeds
  std::size_t dmq_done_ = 0, weights_done_ = 0, batches_fed_ = 0, layers_final_ = 0;
  std::vector<float> scratch_;    ///< reused: DMQ inputs divided by factors, weights unquantized
  std::vector<float> converted_;  ///< reused: an input as float32 where it is needed whole
};

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq

#if !PTQ_SESSION_COMPILED
#include "ptq/session/calibration_session_impl.hpp"
#endif
