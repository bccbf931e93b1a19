// The bounded-memory mode of one activation (`--memory bounded`): the two passes of
// ifmr_two_pass.hpp or hfmg_two_pass.hpp behind one interface, for a caller that can show the
// same batches twice (a file reader, or an engine asked for a second pass).
//
//   two_pass_observer o(settings, kernels, "conv1 input");
//   o.begin(total_elements);               // IFMR needs N before pass 1; HFMG ignores it
//   for (b...) o.observe(b, x_b, n_b);     // pass 1
//   o.next_pass();
//   for (b...) o.observe(b, x_b, n_b);     // pass 2: the same batches, in any order
//   auto r = o.finalize();                 // == activation_observer's result, bit for bit
//
// The states of each pass are public (`state()`), so a sharded run observes its batches in
// per-rank observers and merges the serialized states (state_wire.hpp) between the passes.
// Depends on the algorithms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>

#include "ptq/algorithms/dispatch.hpp"
#include "ptq/algorithms/hfmg_two_pass.hpp"
#include "ptq/algorithms/ifmr_two_pass.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Which memory mode an activation calibration uses.
enum class memory_mode : std::uint8_t {
  /// Today's one pass: IFMR keeps every value (4·N bytes), HFMG one histogram.
  one_pass,
  /// Two passes over the same batches; IFMR keeps O(k + K) values, HFMG O(bins).
  bounded,
};

class two_pass_observer {
 public:
  /// The states: pass-1 and pass-2 of the algorithm.
  using state_variant = std::variant<std::monostate, ifmr_tails_state, ifmr_losses_state,
                                     hfmg_ranges_state, hfmg_bins_state>;

  explicit two_pass_observer(const activation_settings& s,
                             const kernels::kernel_set& k = kernels::default_kernels(),
                             std::string name = "activation")
      : s_(s), k_(k), name_(std::move(name)) {}

  /// Starts pass 1 for `total` elements over all batches (IFMR's percentile ranks need it).
  [[nodiscard]] result<> begin(std::uint64_t total) {
    if (s_.algo == activation_algo::hfmg) {
      state_ = hfmg_ranges_state{};
      pass_ = 1;
      return {};
    }
    auto t = make_ifmr_tails(s_.ifmr, total);
    if (!t)
      return named(t.error());
    state_ = std::move(t).value();
    pass_ = 1;
    return {};
  }

  /// One batch of the current pass.
  [[nodiscard]] result<> observe(std::size_t batch, const float* x, std::size_t n) {
    result<> r = make_error(errc::session_call_invalid, name_ + ": observe before begin");
    std::visit(
        [&](auto& st) {
          using T = std::decay_t<decltype(st)>;
          if constexpr (std::is_same_v<T, ifmr_losses_state>) {
            r = ptq::observe(st, batch, x, n, s_.ifmr.threads, k_, name_);
          } else if constexpr (std::is_same_v<T, hfmg_bins_state>) {
            r = ptq::observe(st, batch, x, n, k_, name_, s_.hfmg.threads);
          } else if constexpr (!std::is_same_v<T, std::monostate>) {
            r = ptq::observe(st, batch, x, n, k_, name_);
          }
        },
        state_);
    return r;
  }

  /// Ends pass 1: the plan of pass 2 from everything pass 1 saw.
  [[nodiscard]] result<> next_pass() {
    if (pass_ != 1)
      return make_error(errc::session_call_invalid, name_ + ": next_pass outside pass 1");
    if (auto* t = std::get_if<ifmr_tails_state>(&state_)) {
      auto plan = ifmr_plan_of(*t, s_.ifmr);
      if (!plan)
        return named(plan.error());
      state_ = make_ifmr_losses(std::move(plan).value());
    } else {
      auto b = make_hfmg_bins(std::get<hfmg_ranges_state>(state_), s_.hfmg);
      if (!b)
        return named(b.error());
      state_ = std::move(b).value();
    }
    pass_ = 2;
    return {};
  }

  [[nodiscard]] result<activation_quant_result> finalize() const {
    if (const auto* l = std::get_if<ifmr_losses_state>(&state_)) {
      auto r = ptq::finalize(*l, s_.ifmr);
      if (!r)
        return named(r.error());
      return r.value().result;
    }
    if (const auto* h = std::get_if<hfmg_bins_state>(&state_)) {
      auto r = ptq::finalize(*h, s_.hfmg, k_);
      if (!r)
        return named(r.error());
      return r.value().result;
    }
    return make_error(errc::session_call_invalid, name_ + ": finalize before pass 2");
  }

  /// Continues from `st`, a state of this observer's algorithm (a merge of several observers'
  /// states): a pass-1 state resumes pass 1, a pass-2 state pass 2.
  [[nodiscard]] result<> resume(state_variant st) {
    const bool ifmr = std::holds_alternative<ifmr_tails_state>(st) ||
                      std::holds_alternative<ifmr_losses_state>(st);
    const bool hfmg = std::holds_alternative<hfmg_ranges_state>(st) ||
                      std::holds_alternative<hfmg_bins_state>(st);
    if ((s_.algo == activation_algo::ifmr && !ifmr) || (s_.algo == activation_algo::hfmg && !hfmg))
      return make_error(errc::state_mismatch, name_ + ": a state of another algorithm");
    pass_ = std::holds_alternative<ifmr_tails_state>(st) ||
                    std::holds_alternative<hfmg_ranges_state>(st)
                ? 1
                : 2;
    state_ = std::move(st);
    return {};
  }

  [[nodiscard]] const activation_settings& settings() const noexcept { return s_; }
  [[nodiscard]] int pass() const noexcept { return pass_; }
  [[nodiscard]] state_variant& state() noexcept { return state_; }
  [[nodiscard]] const state_variant& state() const noexcept { return state_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  [[nodiscard]] error named(const error& e) const {
    return make_error(e.code, name_ + ": " + e.message, e.note);
  }

  activation_settings s_;
  kernels::kernel_set k_;
  std::string name_;
  state_variant state_;
  int pass_ = 0;
};

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
