// The wire format of the two-pass IFMR states (ifmr_two_pass.hpp; byte layout in
// docs/scale-out.md) and the field helpers every state's format shares. Split from
// state_wire.hpp, which includes it, because the pass-2 state is the largest format.
// Depends on: core.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ptq/algorithms/scale_out/ifmr_two_pass.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/wire.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

namespace detail {

[[nodiscard]] inline std::vector<std::int64_t> as_i64(const std::vector<std::uint64_t>& v) {
  return {v.begin(), v.end()};
}

[[nodiscard]] inline error ended_early(std::string_view what) {
  return wire_payload_error(what, "the payload ends inside a field");
}

[[nodiscard]] inline bool finite_range(float lo, float hi) noexcept {
  return std::isfinite(lo) && std::isfinite(hi) && lo <= hi;
}

}  // namespace detail

// ---- IFMR pass 1 -------------------------------------------------------------------------------

[[nodiscard]] inline std::string serialize(const ifmr_tails_state& st) {
  wire_writer w;
  w.u64(st.total);
  w.u64(st.k_large);
  w.u64(st.k_small);
  w.i64s(detail::as_i64(st.sizes));
  w.f32s(st.large);
  w.f32s(st.small);
  return wire_frame(state_kind::ifmr_tails, w.out);
}

[[nodiscard]] inline result<ifmr_tails_state> deserialize_ifmr_tails(
    std::string_view bytes, std::string_view what = "state") {
  auto p = wire_unframe(bytes, state_kind::ifmr_tails, what);
  if (!p)
    return p.error();
  wire_reader r(p.value());
  ifmr_tails_state st;
  st.total = r.u64();
  st.k_large = r.u64();
  st.k_small = r.u64();
  const auto sizes = r.i64s();
  st.large = r.f32s();
  st.small = r.f32s();
  if (r.failed())
    return detail::ended_early(what);
  if (!r.at_end())
    return wire_payload_error(what, "bytes after the last field");
  if (st.total == 0 || st.k_large == 0 || st.k_small == 0 || st.k_large > st.total ||
      st.k_small > st.total) {
    return wire_payload_error(what, "ranks outside [1, total]");
  }
  std::uint64_t seen = 0;
  for (const auto c : sizes) {
    const auto u = static_cast<std::uint64_t>(c);
    if (c < 0 || u > st.total - seen)
      return wire_payload_error(what, "batch sizes add up to more than the total");
    seen += u;
    st.sizes.push_back(u);
  }
  if (st.large.size() != std::min(seen, st.k_large) ||
      st.small.size() != std::min(seen, st.k_small)) {
    return wire_payload_error(what, "the kept tails do not match the ranks and the batches");
  }
  for (std::size_t i = 0; i < st.large.size(); ++i) {
    if (!std::isfinite(st.large[i]) || (i > 0 && st.large[i] > st.large[i - 1]))
      return wire_payload_error(what, "the largest values are not finite and descending");
  }
  for (std::size_t i = 0; i < st.small.size(); ++i) {
    if (!std::isfinite(st.small[i]) || (i > 0 && st.small[i] < st.small[i - 1]))
      return wire_payload_error(what, "the smallest values are not finite and ascending");
  }
  return st;
}

// ---- IFMR pass 2 -------------------------------------------------------------------------------

[[nodiscard]] inline std::string serialize(const ifmr_losses_state& st) {
  wire_writer w;
  w.f32(st.plan.max0);
  w.f32(st.plan.min0);
  w.u64(st.plan.candidates.size());
  for (const auto& c : st.plan.candidates) {
    w.f32(c.lo);
    w.f32(c.hi);
    w.f32(c.scale);
  }
  w.i64s(detail::as_i64(st.plan.offsets));
  w.u64(st.seen.size());
  for (const auto s : st.seen)
    w.u8(s);
  w.u64(st.folded);
  w.f64s(st.loss);
  w.u64(st.pending.size());
  for (const auto& [j, part] : st.pending) {
    w.u64(j);
    w.f64s(part);
  }
  w.u64(st.pieces.size());
  for (const auto& [j, ps] : st.pieces) {
    w.u64(j);
    w.u64(ps.size());
    for (const auto& piece : ps) {
      w.u32(piece.at);
      w.f32s(piece.values);
    }
  }
  return wire_frame(state_kind::ifmr_losses, w.out);
}

[[nodiscard]] inline result<ifmr_losses_state> deserialize_ifmr_losses(
    std::string_view bytes, std::string_view what = "state",
    const kernels::kernel_set& k = kernels::default_kernels()) {
  auto p = wire_unframe(bytes, state_kind::ifmr_losses, what);
  if (!p)
    return p.error();
  wire_reader r(p.value());
  ifmr_plan plan;
  plan.max0 = r.f32();
  plan.min0 = r.f32();
  plan.candidates.resize(r.count(12));
  for (auto& c : plan.candidates) {
    c.lo = r.f32();
    c.hi = r.f32();
    c.scale = r.f32();
  }
  const auto offsets = r.i64s();
  if (r.failed())
    return detail::ended_early(what);
  if (plan.candidates.empty() || offsets.size() < 2 || offsets[0] != 0)
    return wire_payload_error(what, "no candidates, or batch offsets that do not start at 0");
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    if (i > 0 && offsets[i] <= offsets[i - 1])
      return wire_payload_error(what, "batch offsets are not increasing");
    plan.offsets.push_back(static_cast<std::uint64_t>(offsets[i]));
  }
  for (const auto& c : plan.candidates) {
    if (!std::isfinite(c.lo) || !std::isfinite(c.hi) || !(c.scale > 0.0f) ||
        !std::isfinite(c.scale)) {
      return wire_payload_error(what, "a candidate is not finite or has a scale <= 0");
    }
  }
  ifmr_losses_state st = make_ifmr_losses(std::move(plan));
  const std::size_t nk = st.plan.candidates.size();
  if (r.count(1) != st.seen.size())
    return wire_payload_error(what, "the batch flags do not match the batch offsets");
  for (auto& s : st.seen) {
    s = r.u8();
    if (s > 1)
      return wire_payload_error(what, "a batch flag is not 0 or 1");
  }
  st.folded = r.u64();
  st.loss = r.f64s();
  if (r.failed())
    return detail::ended_early(what);
  if (st.folded > st.blocks() || st.loss.size() != nk)
    return wire_payload_error(what, "folded blocks or loss count out of range");
  std::size_t npending = r.count(16);
  std::uint64_t last = 0;
  for (std::size_t i = 0; i < npending && !r.failed(); ++i) {
    const std::uint64_t j = r.u64();
    auto part = r.f64s();
    if (r.failed())
      break;
    if (j < st.folded || j >= st.blocks() || (i > 0 && j <= last) || part.size() != nk)
      return wire_payload_error(what, "a pending block is out of order or of the wrong size");
    last = j;
    st.pending.emplace(j, std::move(part));
  }
  const std::size_t npieced = r.count(16);
  for (std::size_t i = 0; i < npieced && !r.failed(); ++i) {
    const std::uint64_t j = r.u64();
    const std::size_t np = r.count(12);
    for (std::size_t q = 0; q < np && !r.failed(); ++q) {
      ifmr_piece piece;
      piece.at = r.u32();
      piece.values = r.f32s();
      if (r.failed())
        break;
      if (st.pending.count(j) != 0 || j < st.folded)
        return wire_payload_error(what, "a piece of a block that is already whole");
      auto added = detail::add_piece(st, j, std::move(piece), k);
      if (!added)
        return wire_payload_error(what, added.error().message);
    }
  }
  if (r.failed())
    return detail::ended_early(what);
  if (!r.at_end())
    return wire_payload_error(what, "bytes after the last field");
  detail::fold_blocks(st);
  return st;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
