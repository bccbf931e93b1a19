// The exchange of a sharded session's activation states (docs/scale-out.md): this rank's
// states travel to rank 0, which merges them, and every rank adopts the merge; over any `Comm`
// (ptq/core/shard_reduce.hpp), such as ptq::mpi_comm (ptq/mpi.hpp).
// Depends on: core.
#pragma once

#include <string>
#include <vector>

#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"
#include "ptq/core/shard_reduce.hpp"
#include "ptq/session/calibration_session.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// The exchange after each activation pass of a sharded session: this rank's states travel to
/// rank 0, which merges them; every rank adopts the merge. Call it on every rank after it fed
/// its batches of every layer (pass 1), and again after pass 2; then the session is done on
/// every rank. `local` is this rank's outcome so far: an error is sent instead of the states
/// (and returned, with every other rank's, as the lowest failing rank's).
template <class Comm>
[[nodiscard]] result<> exchange_shard_states(calibration_session& s, Comm& comm,
                                             const result<>& local = {}) {
  const result<std::string> mine = local ? s.shard_states() : result<std::string>(local.error());
  auto merged = shard_reduce(
      comm, mine, [&](const std::vector<std::string>& all) { return s.merge_shard_states(all); });
  if (!merged)
    return merged.error();
  return s.adopt_shard_states(merged.value());
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
