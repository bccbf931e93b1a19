// The wire format of every statistic state (docs/scale-out.md has the byte layout): each state's
// `serialize(state)` is one frame of core/wire.hpp; `deserialize_<kind>(bytes)` checks the frame
// and then every field, so what it returns is a state the algorithms can continue from. A state
// that reads back serializes to the same bytes. `what` names the bytes in messages (a file, a
// rank). The IFMR states' are in ifmr_wire.hpp, included here.
// Depends on: core.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ptq/algorithms/activations/invariant_histogram.hpp"
#include "ptq/algorithms/scale_out/hfmg_two_pass.hpp"
#include "ptq/algorithms/scale_out/ifmr_wire.hpp"
#include "ptq/algorithms/scale_out/stat_states.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/wire.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// The largest HFMG bin count a state may hold (the toolkit's largest is 8192).
inline constexpr std::uint64_t max_state_bins = 65536;

// ---- min/max ---------------------------------------------------------------------------------

[[nodiscard]] inline std::string serialize(const minmax_state& st) {
  wire_writer w;
  w.u64(st.count);
  w.f32(st.lo);
  w.f32(st.hi);
  return wire_frame(state_kind::minmax, w.out);
}

[[nodiscard]] inline result<minmax_state> deserialize_minmax(std::string_view bytes,
                                                             std::string_view what = "state") {
  auto p = wire_unframe(bytes, state_kind::minmax, what);
  if (!p)
    return p.error();
  wire_reader r(p.value());
  minmax_state st;
  st.count = r.u64();
  st.lo = r.f32();
  st.hi = r.f32();
  if (r.failed())
    return detail::ended_early(what);
  if (!r.at_end())
    return wire_payload_error(what, "bytes after the last field");
  if (st.count != 0 && !detail::finite_range(st.lo, st.hi))
    return wire_payload_error(what, "min/max not finite or min > max");
  return st;
}

// ---- DMQ channel absmax ------------------------------------------------------------------------

[[nodiscard]] inline std::string serialize(const channel_absmax_state& st) {
  wire_writer w;
  w.u64(st.batches);
  w.f32s(st.absmax);
  return wire_frame(state_kind::channel_absmax, w.out);
}

[[nodiscard]] inline result<channel_absmax_state> deserialize_channel_absmax(
    std::string_view bytes, std::string_view what = "state") {
  auto p = wire_unframe(bytes, state_kind::channel_absmax, what);
  if (!p)
    return p.error();
  wire_reader r(p.value());
  channel_absmax_state st;
  st.batches = r.u64();
  st.absmax = r.f32s();
  if (r.failed())
    return detail::ended_early(what);
  if (!r.at_end())
    return wire_payload_error(what, "bytes after the last field");
  if ((st.batches == 0) != st.absmax.empty())
    return wire_payload_error(what, "channel values without batches, or batches without them");
  for (const float a : st.absmax) {
    if (!(a >= 0.0f) || !std::isfinite(a))
      return wire_payload_error(what, "a channel absmax is negative or not finite");
  }
  return st;
}

// ---- HFMG pass 1 -------------------------------------------------------------------------------

[[nodiscard]] inline std::string serialize(const hfmg_ranges_state& st) {
  wire_writer w;
  w.u64(st.batches.size());
  for (const auto& [b, range] : st.batches) {
    w.u64(b);
    w.f32(range.lo);
    w.f32(range.hi);
  }
  return wire_frame(state_kind::hfmg_ranges, w.out);
}

[[nodiscard]] inline result<hfmg_ranges_state> deserialize_hfmg_ranges(
    std::string_view bytes, std::string_view what = "state") {
  auto p = wire_unframe(bytes, state_kind::hfmg_ranges, what);
  if (!p)
    return p.error();
  wire_reader r(p.value());
  hfmg_ranges_state st;
  const std::size_t n = r.count(16);
  std::uint64_t last = 0;
  for (std::size_t i = 0; i < n && !r.failed(); ++i) {
    const std::uint64_t b = r.u64();
    batch_range range{r.f32(), r.f32()};
    if (r.failed())
      break;
    if ((i > 0 && b <= last) || !detail::finite_range(range.lo, range.hi))
      return wire_payload_error(what, "batch ranges out of order, not finite or min > max");
    last = b;
    st.batches.emplace(b, range);
  }
  if (r.failed())
    return detail::ended_early(what);
  if (!r.at_end())
    return wire_payload_error(what, "bytes after the last field");
  return st;
}

// ---- HFMG pass 2 -------------------------------------------------------------------------------

namespace detail {

inline void write_ranges(wire_writer& w, const std::vector<batch_range>& v) {
  w.u64(v.size());
  for (const auto& range : v) {
    w.f32(range.lo);
    w.f32(range.hi);
  }
}

[[nodiscard]] inline std::vector<batch_range> read_ranges(wire_reader& r) {
  std::vector<batch_range> v(r.count(8));
  for (auto& range : v) {
    range.lo = r.f32();
    range.hi = r.f32();
  }
  return v;
}

}  // namespace detail

[[nodiscard]] inline std::string serialize(const hfmg_bins_state& st) {
  wire_writer w;
  w.u64(st.bins);
  detail::write_ranges(w, st.ranges);
  detail::write_ranges(w, st.own);
  w.u64(st.folded);
  w.f32(st.merged.lo);
  w.f32(st.merged.hi);
  w.i64s(st.merged.counts);
  w.u64(st.pending.size());
  for (const auto& [b, counts] : st.pending) {
    w.u64(b);
    w.i64s(counts);
  }
  return wire_frame(state_kind::hfmg_bins, w.out);
}

[[nodiscard]] inline result<hfmg_bins_state> deserialize_hfmg_bins(
    std::string_view bytes, std::string_view what = "state") {
  auto p = wire_unframe(bytes, state_kind::hfmg_bins, what);
  if (!p)
    return p.error();
  wire_reader r(p.value());
  hfmg_bins_state st;
  st.bins = r.u64();
  st.ranges = detail::read_ranges(r);
  st.own = detail::read_ranges(r);
  st.folded = r.u64();
  st.merged.lo = r.f32();
  st.merged.hi = r.f32();
  st.merged.counts = r.i64s();
  if (r.failed())
    return detail::ended_early(what);
  if (st.bins < 4 || st.bins > max_state_bins) {
    return wire_payload_error(what,
                              "bin count outside [4, " + std::to_string(max_state_bins) + "]");
  }
  if (st.ranges.empty() || st.own.size() != st.ranges.size() || st.folded > st.ranges.size())
    return wire_payload_error(what, "range lists of different lengths or too many batches folded");
  for (std::size_t b = 0; b < st.ranges.size(); ++b) {
    const auto& m = st.ranges[b];
    const auto& o = st.own[b];
    const bool prefix = b == 0 ? (m.lo == o.lo && m.hi == o.hi)
                               : (m.lo == std::fmin(st.ranges[b - 1].lo, o.lo) &&
                                  m.hi == std::fmax(st.ranges[b - 1].hi, o.hi));
    if (!detail::finite_range(m.lo, m.hi) || !detail::finite_range(o.lo, o.hi) || !prefix)
      return wire_payload_error(what, "batch ranges that are not the merged ranges of pass 1");
  }
  const auto nonneg = [](const std::vector<std::int64_t>& c) {
    for (const auto v : c) {
      if (v < 0)
        return false;
    }
    return true;
  };
  const bool merged_ok =
      st.folded == 0
          ? st.merged.counts.empty() && st.merged.lo == 0.0f && st.merged.hi == 0.0f
          : st.merged.counts.size() == st.bins && st.merged.lo == st.ranges[st.folded - 1].lo &&
                st.merged.hi == st.ranges[st.folded - 1].hi && nonneg(st.merged.counts);
  if (!merged_ok)
    return wire_payload_error(what, "the replayed histogram does not match its batches");
  const std::size_t n = r.count(16);
  std::uint64_t last = 0;
  for (std::size_t i = 0; i < n && !r.failed(); ++i) {
    const std::uint64_t b = r.u64();
    auto counts = r.i64s();
    if (r.failed())
      break;
    if (b <= st.folded || b >= st.ranges.size() || (i > 0 && b <= last) ||
        counts.size() != st.bins || !nonneg(counts)) {
      return wire_payload_error(what, "a binned batch is out of order, replayable or misshapen");
    }
    last = b;
    st.pending.emplace(b, std::move(counts));
  }
  if (r.failed())
    return detail::ended_early(what);
  if (!r.at_end())
    return wire_payload_error(what, "bytes after the last field");
  return st;
}

// ---- the order-invariant histogram -------------------------------------------------------------

[[nodiscard]] inline std::string serialize(const invariant_histogram& h) {
  wire_writer w;
  w.u64(h.bins);
  w.u32(static_cast<std::uint32_t>(h.exponent));
  w.u64(static_cast<std::uint64_t>(h.start));
  w.i64s(h.counts);
  return wire_frame(state_kind::invariant_histogram, w.out);
}

[[nodiscard]] inline result<invariant_histogram> deserialize_invariant_histogram(
    std::string_view bytes, std::string_view what = "state") {
  auto p = wire_unframe(bytes, state_kind::invariant_histogram, what);
  if (!p)
    return p.error();
  wire_reader r(p.value());
  invariant_histogram h;
  h.bins = r.u64();
  h.exponent = static_cast<std::int32_t>(r.u32());
  h.start = static_cast<std::int64_t>(r.u64());
  h.counts = r.i64s();
  if (r.failed())
    return detail::ended_early(what);
  if (!r.at_end())
    return wire_payload_error(what, "bytes after the last field");
  if (h.bins < 4 || h.bins > max_state_bins || h.exponent < invariant_min_exponent ||
      h.exponent > 200 || (h.start < 0 ? -h.start : h.start) >= (std::int64_t{1} << 62)) {
    return wire_payload_error(what, "bin count, exponent or start out of range");
  }
  if (!h.counts.empty() && (h.counts.size() != h.bins || h.counts[0] <= 0)) {
    return wire_payload_error(what, "counts that are not B long or do not start at a nonzero bin");
  }
  for (const auto c : h.counts) {
    if (c < 0)
      return wire_payload_error(what, "a negative count");
  }
  return h;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
