// The IFMR observer: keeps every batch (the search needs all the data, as the toolkit keeps
// it) and runs the search (ifmr_search.hpp) on finalize(). A float32 batch whose memory has a
// shared owner (tensor_view::owner: a mapped .npy or safetensors file) is kept where it lies;
// every other batch is copied, or converted, into the observer's own buffer.
// Depends on: core and kernels.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ptq/algorithms/activations/activation.hpp"
#include "ptq/algorithms/activations/ifmr_search.hpp"
#include "ptq/algorithms/activations/view_blocks.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/huge_pages.hpp"
#include "ptq/kernels/float_segments.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// What an IFMR observer accumulates: every batch, in order, each either copied into `copied`
/// or kept where it lies (alive through `owners`). Kept apart from the settings and kernels.
struct ifmr_state {
  /// One batch: values [at, at + n) of `copied`, or `kept`[0, n) when kept where it lies.
  struct batch {
    const float* kept = nullptr;
    std::size_t at = 0;
    std::size_t n = 0;
  };
  std::vector<float> copied;
  std::vector<batch> order;
  std::vector<std::shared_ptr<const void>> owners;  ///< what keeps the kept batches valid

  [[nodiscard]] std::size_t batches() const noexcept { return order.size(); }
  /// Every value, in batch order; batches copied one after the other are one run.
  [[nodiscard]] kernels::float_segments segments() const {
    kernels::float_segments s;
    for (std::size_t b = 0; b < order.size();) {
      if (order[b].kept != nullptr) {
        s.add(order[b].kept, order[b].n);
        ++b;
        continue;
      }
      const std::size_t at = order[b].at;
      std::size_t n = 0;
      for (; b < order.size() && order[b].kept == nullptr; ++b)
        n += order[b].n;
      s.add(copied.data() + at, n);
    }
    return s;
  }
};

/// IFMR observer: observe() each calibration batch (the data is kept, as the toolkit does), then
/// finalize(). Holds its kernel set by value, so it never points into a moved-from owner.
class ifmr_observer {
 public:
  using settings_type = ifmr_settings;

  explicit ifmr_observer(ifmr_settings s = {},
                         const kernels::kernel_set& k = kernels::default_kernels(),
                         std::string name = "activation")
      : s_(s), k_(k), name_(std::move(name)) {}

  /// Adds one batch (flattened), copied. Errors: empty batch, NaN/Inf (naming the batch and
  /// index).
  [[nodiscard]] result<> observe(const float* x, std::size_t n) {
    auto mm = checked_minmax(label(), x, n, kernels::threaded_minmax{k_, s_.threads});
    if (!mm)
      return mm.error();
    const std::size_t old = state_.copied.size();
    state_.copied.insert(state_.copied.end(), x, x + n);
    state_.order.push_back({nullptr, old, n});
    return {};
  }
  /// Whether observe(v) keeps `v` where it lies instead of copying it: float32 in C order with
  /// an owner (tensor_view::owner), which the observer then holds until reset().
  [[nodiscard]] static bool keeps_in_place(const tensor_view& v) noexcept {
    return v.owner != nullptr && v.in_place() != nullptr;
  }
  /// Adds one batch in any layout a tensor_view reads (a mapped float16 file, a strided
  /// tensor), converted straight into the kept data: no copy of its own; kept where it lies
  /// when keeps_in_place(v). The same data and errors as observe() of its float32 values in C
  /// order; E909 for a view it cannot read.
  [[nodiscard]] result<> observe(const tensor_view& v) {
    if (std::string problem = tensor_view_problem(v); !problem.empty())
      return make_error(errc::tensor_view_invalid, label() + ": " + problem);
    if (const float* x = v.in_place()) {
      if (!keeps_in_place(v))
        return observe(x, v.size());
      auto mm = checked_minmax(label(), x, v.size(), kernels::threaded_minmax{k_, s_.threads});
      if (!mm)
        return mm.error();
      if (state_.owners.empty() || state_.owners.back() != v.owner)
        state_.owners.push_back(v.owner);
      state_.order.push_back({x, 0, v.size()});
      return {};
    }
    const std::size_t n = v.size();
    const std::size_t old = state_.copied.size();
    state_.copied.resize(old + n);
    convert_view(v, state_.copied.data() + old, s_.threads);
    auto mm = checked_minmax(label(), state_.copied.data() + old, n,
                             kernels::threaded_minmax{k_, s_.threads});
    if (!mm) {
      state_.copied.resize(old);
      return mm.error();
    }
    state_.order.push_back({nullptr, old, n});
    return {};
  }
  /// Makes room for `values` copied values in all (the batches still to come included), so
  /// that they are appended without reallocating; a large buffer is advised huge pages. (A
  /// caller whose batches are kept in place, keeps_in_place, reserves nothing.)
  void reserve(std::size_t values) {
    if (values <= state_.copied.capacity() || values > state_.copied.max_size())
      return;
    state_.copied.reserve(values);
    detail::advise_huge_pages(state_.copied.data(), values * sizeof(float));
  }
  /// Adds one batch from a contiguous container (data() and size()).
  template <class C>
  [[nodiscard]] result<> observe(const C& batch) {
    return observe(batch.data(), batch.size());
  }

  /// scale_d / offset_d of the batches observed so far. It changes nothing: observing may go on
  /// after it (but each estimate searches every value kept; a training loop that asks often is
  /// better served by HFMG, docs/calibrate.md "In a training loop").
  [[nodiscard]] result<activation_quant_result> finalize() const {
    auto r = search();
    if (!r)
      return r.error();
    return r.value().result;
  }
  /// finalize() under the name a training loop reads best.
  [[nodiscard]] result<activation_quant_result> estimate() const { return finalize(); }
  /// Forgets every batch and frees what they held, the owners of kept batches included (the
  /// settings, kernels and name stay).
  void reset() noexcept { state_ = ifmr_state{}; }
  /// finalize() with the details of the search (start values, candidates, losses): the same
  /// computation, for a caller that reports it.
  [[nodiscard]] result<ifmr_search> search() const {
    if (state_.batches() == 0) {
      return make_error(errc::no_data, name_ + ": IFMR finalize before observe");
    }
    auto r = ifmr_run(state_.segments(), s_, k_);
    if (!r)
      return make_error(r.error().code, name_ + ": " + r.error().message, r.error().note);
    return r;
  }

  [[nodiscard]] std::size_t batches() const noexcept { return state_.batches(); }
  /// Every value observed, in order (valid until the next observe or reset).
  [[nodiscard]] kernels::float_segments data() const { return state_.segments(); }
  [[nodiscard]] const ifmr_settings& settings() const noexcept { return s_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  /// "<name> batch <i>" for the batch being observed.
  [[nodiscard]] std::string label() const {
    return name_ + " batch " + std::to_string(state_.batches() + 1);
  }

  ifmr_settings s_;
  kernels::kernel_set k_;
  std::string name_;
  ifmr_state state_;
};

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
