// The order-free statistics as mergeable states: a tensor's min/max (ARQ per tensor, HFMG's
// pass 1 per batch) and DMQ's per-input-channel max|X| (dmq.hpp's activation_channel_absmax).
// min and max are exact under any grouping, so merge is simply elementwise; the states exist so
// that every statistic the session computes has the same observe / merge / serialize shape
// (state_wire.hpp).
// Depends on: core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ptq/algorithms/activations/dmq.hpp"
#include "ptq/algorithms/layer/tensor.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// min and max over every batch observed.
struct minmax_state {
  std::uint64_t count = 0;  ///< elements observed; 0 = empty (lo/hi then meaningless)
  float lo = 0.0f;
  float hi = 0.0f;
};

/// One batch. Errors: empty batch, NaN/Inf.
[[nodiscard]] inline result<> observe(minmax_state& st, const float* x, std::size_t n,
                                      const kernels::kernel_set& k,
                                      const std::string& name = "tensor") {
  auto mm = checked_minmax(name, x, n, k.minmax);
  if (!mm)
    return mm.error();
  if (st.count == 0) {
    st.lo = mm.value().min;
    st.hi = mm.value().max;
  } else {
    st.lo = mm.value().min < st.lo ? mm.value().min : st.lo;
    st.hi = mm.value().max > st.hi ? mm.value().max : st.hi;
  }
  st.count += n;
  return {};
}

inline void merge(minmax_state& st, const minmax_state& other) noexcept {
  if (other.count == 0)
    return;
  if (st.count == 0) {
    st = other;
    return;
  }
  st.lo = other.lo < st.lo ? other.lo : st.lo;
  st.hi = other.hi > st.hi ? other.hi : st.hi;
  st.count += other.count;
}

/// DMQ's per input channel max|X| over every batch observed.
struct channel_absmax_state {
  std::uint64_t batches = 0;
  std::vector<float> absmax;  ///< per input channel; empty until the first batch
};

/// One input batch of the layer (`op` says where its channel axis is). Errors: those of
/// activation_channel_absmax, and a channel count that differs from earlier batches'.
[[nodiscard]] inline result<> observe(channel_absmax_state& st, const tensor_view& x, layer_type op,
                                      const kernels::kernel_set& k) {
  auto a = activation_channel_absmax(x, op, k);
  if (!a)
    return a.error();
  channel_absmax_state one{1, std::move(a).value()};
  if (st.batches != 0 && one.absmax.size() != st.absmax.size()) {
    return make_error(errc::shape_mismatch, x.name + ": " + std::to_string(one.absmax.size()) +
                                                " input channels, earlier batches had " +
                                                std::to_string(st.absmax.size()));
  }
  if (st.batches == 0) {
    st = std::move(one);
    return {};
  }
  for (std::size_t c = 0; c < st.absmax.size(); ++c)
    st.absmax[c] = one.absmax[c] > st.absmax[c] ? one.absmax[c] : st.absmax[c];
  ++st.batches;
  return {};
}

[[nodiscard]] inline result<> merge(channel_absmax_state& st, const channel_absmax_state& other) {
  if (other.batches == 0)
    return {};
  if (st.batches == 0) {
    st = other;
    return {};
  }
  if (other.absmax.size() != st.absmax.size()) {
    return make_error(errc::state_mismatch,
                      "channel absmax: cannot merge " + std::to_string(other.absmax.size()) +
                          " channels into " + std::to_string(st.absmax.size()));
  }
  for (std::size_t c = 0; c < st.absmax.size(); ++c)
    st.absmax[c] = other.absmax[c] > st.absmax[c] ? other.absmax[c] : st.absmax[c];
  st.batches += other.batches;
  return {};
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
