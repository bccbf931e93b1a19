// Phase 4 in the bounded-memory mode (`activation_mode::kind::bounded`, docs/scale-out.md): the
// engine feeds each layer's `batch_num` batches twice, in the same order; the session runs the two
// passes of two_pass_observer on them and finalizes after the second, with the one-pass mode's
// result bit for bit. IFMR's percentile ranks need the element count before pass 1: the session
// takes batch_num times the first batch's count, so every batch of a layer must have the same
// element count (E803 otherwise; `ptq observe --memory bounded` counts the files and has no such
// rule). And the order-invariant mode's HFMG histogram.
// Depends on: core and algorithms.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "ptq/algorithms/activations/invariant_histogram.hpp"
#include "ptq/algorithms/scale_out/two_pass_observer.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"
#include "ptq/session/checks.hpp"
#include "ptq/session/session_layer.hpp"
#include "ptq/session/session_options.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

namespace detail {

/// The layer's view of `input`: divided by its DMQ factors into `scaled`, or `input` itself.
[[nodiscard]] inline result<const float*> balanced_input(const session_layer& l,
                                                         const tensor_view& input,
                                                         std::vector<float>& scaled) {
  const float* x = input.in_place();  // a float32 batch (batch_as_float32)
  if (l.balance_factors.empty())
    return x;
  scaled.assign(x, x + input.size());
  if (auto st = divide_by_balance_factors(l, scaled.data(), input.shape); !st)
    return in_layer(l.desc.name, st.error());
  return static_cast<const float*>(scaled.data());
}

/// The layer's two-pass observer of `Policy`, started on the layer's first batch of `n`
/// elements (of `batch_num` batches).
template <class Policy>
[[nodiscard]] result<> begin_two_pass(session_layer& l, const typename Policy::settings& s,
                                      std::size_t n, std::size_t batch_num,
                                      const kernels::kernel_set& k) {
  auto& t = l.activation_pass.emplace<two_pass_layer<Policy>>(
      two_pass_layer<Policy>{two_pass_observer<Policy>(s, k, l.desc.name + " input"), n});
  if (auto st = t.observer.begin(static_cast<std::uint64_t>(batch_num) * n); !st)
    return in_layer(l.desc.name, st.error());
  return {};
}

/// Observes `input` as global batch `b` of the current pass through the layer's two-pass
/// observer, started on the layer's first batch. IFMR's ranks need the total before pass 1, so
/// every batch of the layer must have the first one's element count (checked in pass 1).
[[nodiscard]] inline result<> observe_two_pass_batch(session_layer& l, const tensor_view& input,
                                                     std::size_t b, bool first_pass,
                                                     const batch_context& ctx) {
  auto x = balanced_input(l, input, ctx.scratch);
  if (!x)
    return x.error();
  const std::size_t n = input.size();
  return with_layer_activation_policy(l, [&](auto policy, const auto& s) -> result<> {
    using two_pass = two_pass_layer<decltype(policy)>;
    if (l.batches_seen == 0) {
      if (auto st = begin_two_pass<decltype(policy)>(l, s, n, ctx.batch_num, ctx.options.kernels);
          !st)
        return st;
    }
    auto& t = std::get<two_pass>(l.activation_pass);
    if (first_pass && n != t.batch_size) {
      return make_error(errc::session_input_invalid,
                        l.desc.name + ": batch " + std::to_string(b + 1) + " has " +
                            std::to_string(n) + " elements, the layer's first batch had " +
                            std::to_string(t.batch_size) +
                            "; two-pass calibration (--memory bounded, --mpi) needs batches of "
                            "one size");
    }
    if (auto st = t.observer.observe(b, x.value(), n); !st)
      return in_layer(l.desc.name, st.error());
    ++l.batches_seen;
    return {};
  });
}

/// The layer's two-pass observer after its first batch: next_pass or finalize it.
template <class Fn>
[[nodiscard]] result<> with_two_pass_observer(session_layer& l, Fn&& fn) {
  return std::visit(
      [&](auto& t) -> result<> {
        using T = std::decay_t<decltype(t)>;
        if constexpr (std::is_same_v<T, std::monostate> || std::is_same_v<T, invariant_histogram>) {
          return make_error(errc::session_call_invalid, l.desc.name + ": no two-pass observer");
        } else {
          return fn(t.observer);
        }
      },
      l.activation_pass);
}

/// One activation batch of an HFMG layer on the order-invariant histogram
/// (activation_mode::kind::order_invariant), finalized after `batch_num`.
[[nodiscard]] inline result<> observe_layer_batch_invariant(session_layer& l,
                                                            const tensor_view& input,
                                                            const hfmg_settings& s,
                                                            const batch_context& ctx) {
  if (auto st = check_layer_input(l.desc, input); !st)
    return st;
  const kernels::kernel_set& k = ctx.options.kernels;
  auto x = detail::balanced_input(l, input, ctx.scratch);
  if (!x)
    return x.error();
  if (l.batches_seen == 0)
    l.activation_pass.emplace<invariant_histogram>();
  auto& h = std::get<invariant_histogram>(l.activation_pass);
  if (auto st = observe(h, x.value(), input.size(), s.num_of_bins, k,
                        l.desc.name + " input batch " + std::to_string(l.batches_seen + 1));
      !st) {
    return st;
  }
  if (++l.batches_seen < ctx.batch_num)
    return {};
  auto r = finalize(h, s, k);
  if (!r)
    return in_layer(l.desc.name, r.error());
  l.activation_params = ctx.fp16 ? with_fp16_scale(r.value().result) : r.value().result;
  l.calibrator.reset();
  l.activation_pass = {};
  return {};
}

/// One activation batch of a layer in the bounded mode: batches [0, batch_num) are pass 1,
/// [batch_num, 2·batch_num) pass 2 (the same batches again); the activation is finalized after
/// the last (FORCE_FP16_QUANT when `fp16`).
[[nodiscard]] inline result<> observe_layer_batch_bounded(session_layer& l,
                                                          const tensor_view& input,
                                                          const batch_context& ctx) {
  if (auto st = check_layer_input(l.desc, input); !st)
    return st;
  const std::size_t batch_num = ctx.batch_num;
  if (auto st = detail::observe_two_pass_batch(l, input, l.batches_seen % batch_num,
                                               l.batches_seen < batch_num, ctx);
      !st) {
    return st;
  }
  if (l.batches_seen == batch_num) {
    return detail::with_two_pass_observer(l, [&](auto& o) -> result<> {
      if (auto st = o.next_pass(); !st)
        return in_layer(l.desc.name, st.error());
      return {};
    });
  }
  if (l.batches_seen < 2 * batch_num)
    return {};
  activation_quant_result r;
  if (auto st = detail::with_two_pass_observer(l,
                                               [&](auto& o) -> result<> {
                                                 auto f = o.finalize();
                                                 if (!f)
                                                   return in_layer(l.desc.name, f.error());
                                                 r = f.value();
                                                 return {};
                                               });
      !st) {
    return st;
  }
  l.activation_params = ctx.fp16 ? with_fp16_scale(r) : r;
  l.calibrator.reset();
  l.activation_pass = {};
  return {};
}

}  // namespace detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
