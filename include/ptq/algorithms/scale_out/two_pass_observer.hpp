// The two-pass activation modes of one activation (`--memory bounded`, `--mpi`): the two passes
// of an activation policy (policies.hpp: its first_pass and second_pass states) behind one
// interface, for a caller that can show the same batches twice (a file reader, or an engine
// asked for a second pass).
//
//   two_pass_observer<ptq::ifmr> o(settings, kernels, "conv1 input");
//   o.begin(total_elements);               // IFMR needs N before pass 1; HFMG ignores it
//   for (b...) o.observe(b, x_b, n_b);     // pass 1
//   o.next_pass();
//   for (b...) o.observe(b, x_b, n_b);     // pass 2: the same batches, in any order
//   auto r = o.finalize();                 // == the policy's one-pass observer, bit for bit
//
// The state of each pass is public (`state()`), so a sharded run observes its batches in
// per-rank observers and merges the serialized states (two_pass_exchange.hpp) between the
// passes.
// Depends on: core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>

#include "ptq/algorithms/policies.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// A two-pass state of `Policy`: none yet, pass 1's or pass 2's.
template <class Policy>
using two_pass_state =
    std::variant<std::monostate, typename Policy::first_pass, typename Policy::second_pass>;

template <class Policy>
class two_pass_observer {
 public:
  using policy = Policy;
  using settings_type = typename Policy::settings;
  using state_type = two_pass_state<Policy>;

  explicit two_pass_observer(const settings_type& s,
                             const kernels::kernel_set& k = kernels::default_kernels(),
                             std::string name = "activation")
      : s_(s), k_(k), name_(std::move(name)) {}

  /// Starts pass 1 for `total` elements over all batches (IFMR's percentile ranks need it).
  [[nodiscard]] result<> begin(std::uint64_t total) {
    auto st = Policy::begin(s_, total);
    if (!st)
      return named(st.error());
    state_ = std::move(st).value();
    return {};
  }

  /// One batch of the current pass.
  [[nodiscard]] result<> observe(std::size_t batch, const float* x, std::size_t n) {
    return std::visit(
        [&](auto& st) -> result<> {
          if constexpr (std::is_same_v<std::decay_t<decltype(st)>, std::monostate>) {
            return make_error(errc::session_call_invalid, name_ + ": observe before begin");
          } else {
            return Policy::observe(st, batch, x, n, s_, k_, name_);
          }
        },
        state_);
  }

  /// Ends pass 1: the plan of pass 2 from everything pass 1 saw.
  [[nodiscard]] result<> next_pass() {
    const auto* first = std::get_if<1>(&state_);
    if (first == nullptr)
      return make_error(errc::session_call_invalid, name_ + ": next_pass outside pass 1");
    auto second = Policy::next_pass(*first, s_);
    if (!second)
      return named(second.error());
    state_ = std::move(second).value();
    return {};
  }

  [[nodiscard]] result<activation_quant_result> finalize() const {
    const auto* second = std::get_if<2>(&state_);
    if (second == nullptr)
      return make_error(errc::session_call_invalid, name_ + ": finalize before pass 2");
    auto r = Policy::finalize(*second, s_, k_);
    if (!r)
      return named(r.error());
    return r;
  }

  /// Continues from `st` (a merge of several observers' states): a pass-1 state resumes pass 1,
  /// a pass-2 state pass 2.
  [[nodiscard]] result<> resume(state_type st) {
    if (std::holds_alternative<std::monostate>(st))
      return make_error(errc::session_call_invalid, name_ + ": resume from no state");
    state_ = std::move(st);
    return {};
  }

  [[nodiscard]] const settings_type& settings() const noexcept { return s_; }
  /// 0 before begin, then 1 or 2.
  [[nodiscard]] int pass() const noexcept { return static_cast<int>(state_.index()); }
  [[nodiscard]] const state_type& state() const noexcept { return state_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  [[nodiscard]] error named(const error& e) const {
    return make_error(e.code, name_ + ": " + e.message, e.note);
  }

  settings_type s_;
  kernels::kernel_set k_;
  std::string name_;
  state_type state_;
};

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
