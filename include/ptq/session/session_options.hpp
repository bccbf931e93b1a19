// What a calibration session reports and how it runs: its phases, the progress event, and the
// options (threads, the activation mode, kernels, callbacks, the AdaRound seed).
// Depends on: core, kernels, config (resolve options) and algorithms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ptq/algorithms/weights/ada.hpp"
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
/// states after each pass (sharded_activations.hpp). The other phases run on every rank alike.
struct shard_info {
  std::size_t rank = 0;
  std::size_t count = 1;
};

/// How many of `batch_num` batches rank `rank` of `count` handles (b % count == rank).
[[nodiscard]] constexpr std::size_t shard_batch_count(const shard_info& s,
                                                      std::size_t batch_num) noexcept {
  return batch_num > s.rank ? (batch_num - s.rank - 1) / s.count + 1 : 0;
}

/// How the activation phase sees its batches (docs/scale-out.md). Every mode gives the one-pass
/// mode's numbers bit for bit, except `order_invariant`, which gives the same bytes for any
/// batch order or split instead of the toolkit's HFMG numbers.
struct activation_mode {
  enum class kind : std::uint8_t {
    /// Each batch once: IFMR keeps every value (4·N bytes), HFMG one histogram.
    one_pass,
    /// One pass; HFMG layers build the order-invariant histogram (invariant_histogram.hpp,
    /// `--order-invariant`), IFMR layers run as in one_pass.
    order_invariant,
    /// Each layer's batches twice, in the same order (`--memory bounded`): IFMR keeps
    /// O(k + K) values, HFMG O(bins).
    bounded,
    /// This process's share of the batches, twice, the states exchanged after each pass
    /// (`shard`, `--mpi`).
    sharded,
  };
  kind pass = kind::one_pass;
  shard_info shard{};  ///< `sharded`: this process's rank of count; ignored otherwise

  /// Whether the engine feeds each layer's batches twice.
  [[nodiscard]] constexpr bool two_passes() const noexcept {
    return pass == kind::bounded || pass == kind::sharded;
  }
  [[nodiscard]] constexpr bool is_sharded() const noexcept { return pass == kind::sharded; }
};

struct session_options {
  resolve_options resolve{};
  unsigned threads = 1;  ///< for the kernels that can use several; results do not depend on it
  activation_mode activation{};
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
};

/// What each activation batch of a session needs besides the layer and its input: the options,
/// the batch count, FORCE_FP16_QUANT, and the session's two buffers, reused over layers and
/// batches (the input divided by DMQ factors; a stored input as float32).
struct batch_context {
  const session_options& options;
  std::size_t batch_num;
  bool fp16;
  std::vector<float>& scratch;
  std::vector<float>& converted;
};

/// The options' combinations a session refuses: E1407 for a shard outside its count, E904 for
/// the order-invariant histogram with keep_search_stats (it has no search details to keep).
[[nodiscard]] inline result<> check_session_options(const session_options& o) {
  const activation_mode& m = o.activation;
  if (m.is_sharded() && (m.shard.count == 0 || m.shard.rank >= m.shard.count)) {
    return make_error(errc::shard_invalid, "session_options::activation: rank " +
                                               std::to_string(m.shard.rank) + " of " +
                                               std::to_string(m.shard.count) + " ranks");
  }
  if (m.pass == activation_mode::kind::order_invariant && o.keep_search_stats) {
    return make_error(errc::invalid_argument,
                      "activation_mode::kind::order_invariant keeps no search statistics: use it "
                      "without keep_search_stats");
  }
  return {};
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
