// What a calibration session reports and how it runs: its phases, the progress event, and the
// options (threads, kernels, callbacks, the AdaRound seed). Depends on config (resolve options),
// kernels and the AdaRound progress type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "ptq/algorithms/ada.hpp"
#include "ptq/algorithms/two_pass_observer.hpp"
#include "ptq/config/resolve.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"
#include "ptq/kernels/kernel_set.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Where a session is; reported to the progress callback.
enum class session_phase : std::uint8_t { fusion, dmq, weights, activations, done };

/// The phase's name in messages: "fusion", "DMQ", "weight quantization", "activation
/// calibration", "done".
[[nodiscard]] constexpr std::string_view to_string(session_phase p) noexcept {
  switch (p) {
    case session_phase::fusion:
      return "fusion";
    case session_phase::dmq:
      return "DMQ";
    case session_phase::weights:
      return "weight quantization";
    case session_phase::activations:
      return "activation calibration";
    case session_phase::done:
      return "done";
  }
  return "?";
}

struct progress_event {
  session_phase phase = session_phase::fusion;
  std::string_view layer;  ///< the layer just handled
  std::size_t done = 0;    ///< steps of this phase finished
  std::size_t total = 0;   ///< steps of this phase
  /// The activation phase counts batches: a step is one layer's batch, `batch` (1-based) of
  /// `batches` (batch_num, times two in the bounded mode). 0 in the other phases.
  std::size_t batch = 0;
  std::size_t batches = 0;
};

/// This process's part of a sharded activation phase (docs/scale-out.md): rank `rank` of
/// `count` feeds the batches b with b % count == rank, twice, and the ranks exchange their
/// states after each pass (shard_exchange.hpp). The other phases run on every rank alike.
struct shard_info {
  std::size_t rank = 0;
  std::size_t count = 1;
};

/// How many of `batch_num` batches rank `rank` of `count` handles (b % count == rank).
[[nodiscard]] constexpr std::size_t shard_batch_count(const shard_info& s,
                                                      std::size_t batch_num) noexcept {
  return batch_num > s.rank ? (batch_num - s.rank - 1) / s.count + 1 : 0;
}

struct session_options {
  resolve_options resolve{};
  unsigned threads = 1;  ///< for the kernels that can use several; results do not depend on it
  /// Activation calibration in one pass (IFMR keeps every value) or in two passes over the same
  /// batches (`bounded`, docs/scale-out.md: the engine feeds each layer's batches twice).
  memory_mode activation_memory = memory_mode::one_pass;
  /// Set: the activation phase is sharded over processes (any memory mode runs the two-pass
  /// states then, the only ones that merge exactly); unset: this process sees every batch.
  std::optional<shard_info> shard;
  /// The kernels every phase uses: the compile-time arch of the TU that makes the options by
  /// default; a binary with per-ISA translation units passes
  /// `kernels::dispatch_kernel_set<kernels::x86_archs>()`.
  kernels::kernel_set kernels = kernels::default_kernels();
  std::function<void(const progress_event&)> on_progress;
  std::uint64_t ada_seed = 0;  ///< AdaRound minibatch seed (recorded by `ptq calibrate`)
  std::size_t ada_report_every = 100;
  /// AdaRound progress: the layer and its iteration, reconstruction and rounding losses.
  std::function<void(std::string_view, const ada_progress&)> on_ada_progress;
  /// Keep each layer's activation search details (session_layer::activation_stats) for a
  /// calibration report (ptq/report/). The search runs once either way; no scale changes.
  bool keep_search_stats = false;
  /// HFMG layers build the order-invariant histogram (invariant_histogram.hpp, `--order-invariant`)
  /// instead of the toolkit's: identical bytes for any batch order or split, not the toolkit's
  /// numbers (docs/scale-out.md says how far). One-pass mode only, without keep_search_stats.
  bool order_invariant_histogram = false;
};

/// The options' combinations a session refuses: E1407 for a shard outside its count, E904 for
/// the order-invariant histogram outside the one-pass mode.
[[nodiscard]] inline result<> check_session_options(const session_options& o) {
  if (const auto& sh = o.shard; sh && (sh->count == 0 || sh->rank >= sh->count)) {
    return make_error(errc::shard_invalid, "session_options::shard: rank " +
                                               std::to_string(sh->rank) + " of " +
                                               std::to_string(sh->count) + " ranks");
  }
  if (o.order_invariant_histogram &&
      (o.activation_memory != memory_mode::one_pass || o.shard || o.keep_search_stats)) {
    return make_error(errc::invalid_argument,
                      "session_options::order_invariant_histogram is a one-pass histogram: use "
                      "it without the bounded memory mode, shard or keep_search_stats");
  }
  return {};
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
