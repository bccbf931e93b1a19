// Phase 4 in the bounded-memory mode (`session_options::activation_memory =
// memory_mode::bounded`, docs/scale-out.md): the engine feeds each layer's `batch_num` batches
// twice, in the same order; the session runs the two passes of two_pass_observer on them and
// finalizes after the second, with the one-pass mode's result bit for bit. IFMR's percentile
// ranks need the element count before pass 1: the session takes batch_num times the first
// batch's count, so every batch of a layer must have the same element count (E803 otherwise;
// `ptq observe --memory bounded` counts the files and has no such rule).
// Depends on the algorithms and session_layer.hpp.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "ptq/algorithms/dmq.hpp"
#include "ptq/algorithms/invariant_histogram.hpp"
#include "ptq/algorithms/two_pass_observer.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"
#include "ptq/session/checks.hpp"
#include "ptq/session/session_layer.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// The activation settings of a layer's calibrator (its observer's, threads included).
[[nodiscard]] inline activation_settings activation_settings_of(const any_layer_calibrator& c) {
  activation_settings s;
  std::visit(
      [&](const auto& lc) {
        using obs = std::decay_t<decltype(lc.observer())>;
        if constexpr (std::is_same_v<obs, hfmg_observer>) {
          s.algo = activation_algo::hfmg;
          s.hfmg = lc.observer().settings();
        } else {
          s.algo = activation_algo::ifmr;
          s.ifmr = lc.observer().settings();
        }
      },
      c);
  return s;
}

namespace detail {

/// The layer's view of `input`: divided by its DMQ factors into `scaled`, or `input` itself.
[[nodiscard]] inline result<const float*> balanced_input(const session_layer& l,
                                                         const tensor_ref& input,
                                                         std::vector<float>& scaled) {
  if (l.balance_factors.empty())
    return input.data;
  scaled.assign(input.data, input.data + input.size());
  if (auto st = dmq_apply_to_activation(scaled.data(), input.shape, l.desc.type, l.balance_factors);
      !st) {
    return in_layer(l.desc.name, st.error());
  }
  return static_cast<const float*>(scaled.data());
}

/// Observes `input` as global batch `b` of the current pass through the layer's two-pass
/// observer, started on the layer's first batch. IFMR's ranks need the total before pass 1, so
/// every batch of the layer must have the first one's element count (checked in pass 1).
[[nodiscard]] inline result<> observe_two_pass_batch(session_layer& l, const tensor_ref& input,
                                                     std::size_t b, bool first_pass,
                                                     std::size_t batch_num,
                                                     const kernels::kernel_set& k,
                                                     std::vector<float>& scratch) {
  auto x = balanced_input(l, input, scratch);
  if (!x)
    return x.error();
  const std::size_t n = input.size();
  if (l.batches_seen == 0) {
    l.bounded.emplace(activation_settings_of(*l.calibrator), k, l.desc.name + " input");
    l.bounded_batch_size = n;
    if (auto st = l.bounded->begin(static_cast<std::uint64_t>(batch_num) * n); !st)
      return in_layer(l.desc.name, st.error());
  } else if (first_pass && n != l.bounded_batch_size) {
    return make_error(errc::session_input_invalid,
                      l.desc.name + ": batch " + std::to_string(b + 1) + " has " +
                          std::to_string(n) + " elements, the layer's first batch had " +
                          std::to_string(l.bounded_batch_size) +
                          "; two-pass calibration (--memory bounded, --mpi) needs batches of one "
                          "size");
  }
  if (auto st = l.bounded->observe(b, x.value(), n); !st)
    return in_layer(l.desc.name, st.error());
  ++l.batches_seen;
  return {};
}

}  // namespace detail

/// One activation batch of an HFMG layer on the order-invariant histogram
/// (session_options::order_invariant_histogram), finalized after `batch_num`.
[[nodiscard]] inline result<> observe_layer_batch_invariant(session_layer& l,
                                                            const tensor_ref& input,
                                                            std::size_t batch_num, bool fp16,
                                                            const kernels::kernel_set& k,
                                                            std::vector<float>& scratch) {
  if (auto st = check_layer_input(l.desc, input); !st)
    return st;
  auto x = detail::balanced_input(l, input, scratch);
  if (!x)
    return x.error();
  const hfmg_settings s = activation_settings_of(*l.calibrator).hfmg;
  if (!l.invariant)
    l.invariant.emplace();
  if (auto st = observe(*l.invariant, x.value(), input.size(), s.num_of_bins, k,
                        l.desc.name + " input batch " + std::to_string(l.batches_seen + 1));
      !st) {
    return st;
  }
  if (++l.batches_seen < batch_num)
    return {};
  auto r = finalize(*l.invariant, s, k);
  if (!r)
    return in_layer(l.desc.name, r.error());
  l.activation_params = fp16 ? with_fp16_scale(r.value().result) : r.value().result;
  l.calibrator.reset();
  l.invariant.reset();
  return {};
}

/// One activation batch of a layer in the bounded mode: batches [0, batch_num) are pass 1,
/// [batch_num, 2·batch_num) pass 2 (the same batches again); the activation is finalized after
/// the last (FORCE_FP16_QUANT when `fp16`).
[[nodiscard]] inline result<> observe_layer_batch_bounded(session_layer& l, const tensor_ref& input,
                                                          std::size_t batch_num, bool fp16,
                                                          const kernels::kernel_set& k,
                                                          std::vector<float>& scratch) {
  if (auto st = check_layer_input(l.desc, input); !st)
    return st;
  if (auto st = detail::observe_two_pass_batch(l, input, l.batches_seen % batch_num,
                                               l.batches_seen < batch_num, batch_num, k, scratch);
      !st) {
    return st;
  }
  if (l.batches_seen == batch_num) {
    if (auto st = l.bounded->next_pass(); !st)
      return in_layer(l.desc.name, st.error());
  } else if (l.batches_seen == 2 * batch_num) {
    auto r = l.bounded->finalize();
    if (!r)
      return in_layer(l.desc.name, r.error());
    l.activation_params = fp16 ? with_fp16_scale(r.value()) : r.value();
    l.calibrator.reset();
    l.bounded.reset();
  }
  return {};
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
