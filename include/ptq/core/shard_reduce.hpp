// One collective step of a sharded calibration over any transport (docs/scale-out.md).
// `Comm` is any type with
//   std::size_t rank() const;     std::size_t size() const;
//   std::vector<std::string> gather(std::string_view mine);   // rank 0: every rank's bytes in
//                                                             // rank order; the others: empty
//   std::string broadcast(std::string_view value);            // every rank: rank 0's value
// such as ptq::mpi_comm (ptq/mpi.hpp), or a test's threads. A step is one gather and one
// broadcast, and every rank takes part in it with its bytes or its error, so a rank that failed
// (a bad batch file) still meets the others: each rank then returns the error of the lowest
// failing rank, noted with that rank, and nothing hangs.
// Depends on: the standard library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"
#include "ptq/core/wire.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

namespace detail {

/// A rank's bytes, or its error, as one frame.
[[nodiscard]] inline std::string encode_shard_status(const result<std::string>& r,
                                                     std::size_t rank) {
  wire_writer w;
  w.u8(r ? 1 : 0);
  if (r) {
    w.bytes(r.value());
  } else {
    const error& e = r.error();
    w.u64(rank);
    w.u32(static_cast<std::uint32_t>(e.code));
    w.bytes(e.message);
    w.bytes(e.note);
    w.bytes(e.path);
  }
  return wire_frame(state_kind::shard_status, w.out);
}

/// The bytes or the error of a status frame; `failed` gets the rank an error comes from.
[[nodiscard]] inline result<std::string> decode_shard_status(std::string_view frame,
                                                             std::size_t from,
                                                             std::size_t& failed) {
  const std::string what = "rank " + std::to_string(from) + " status";
  failed = from;
  auto p = wire_unframe(frame, state_kind::shard_status, what);
  if (!p)
    return p.error();
  wire_reader rd(p.value());
  const bool ok = rd.u8() != 0;
  if (ok) {
    std::string bytes(rd.bytes());
    if (rd.failed() || !rd.at_end())
      return wire_payload_error(what, "ended early or bytes after the payload");
    return bytes;
  }
  const std::uint64_t rank = rd.u64();
  const std::uint32_t code = rd.u32();
  std::string message(rd.bytes());
  std::string note(rd.bytes());
  std::string path(rd.bytes());
  if (rd.failed() || !rd.at_end())
    return wire_payload_error(what, "ended early or bytes after the error");
  if (code == 0 || code > 0xffffu || message.empty())
    return wire_payload_error(what, "an error without a code or a message");
  error e = make_error(static_cast<errc>(code), std::move(message), std::move(note));
  e.path = std::move(path);
  failed = static_cast<std::size_t>(rank);
  return e;
}

}  // namespace detail

/// One collective step: every rank gives its bytes or its error; rank 0 runs `merge` (a
/// callable: result<std::string>(const std::vector<std::string>& bytes_by_rank)) when no rank
/// failed; every rank returns rank 0's merged bytes, or the lowest failing rank's error (rank
/// 0's merge error when only the merge failed).
template <class Comm, class Merge>
[[nodiscard]] result<std::string> shard_reduce(Comm& comm, const result<std::string>& mine,
                                               Merge&& merge) {
  const std::vector<std::string> sent = comm.gather(detail::encode_shard_status(mine, comm.rank()));
  result<std::string> out = std::string();
  std::size_t failed = 0;
  if (comm.rank() == 0) {
    std::vector<std::string> bytes;
    bytes.reserve(sent.size());
    for (std::size_t r = 0; r < sent.size() && out; ++r) {
      auto got = detail::decode_shard_status(sent[r], r, failed);
      if (!got) {
        out = got.error();
      } else {
        bytes.push_back(std::move(got).value());
      }
    }
    if (out) {
      failed = 0;
      out = merge(bytes);
    }
  }
  // Rank 0 relays the outcome, its own errors too, so every rank reads the same one.
  auto r = detail::decode_shard_status(comm.broadcast(detail::encode_shard_status(out, failed)), 0,
                                       failed);
  if (!r) {
    error e = r.error();
    const std::string where =
        "on rank " + std::to_string(failed) + " of " + std::to_string(comm.size());
    e.note = e.note.empty() ? where : e.note + " (" + where + ")";
    return e;
  }
  return r;
}

/// A collective step that carries no data: ok on every rank, or on every rank the lowest
/// failing rank's error. A rank whose session could not be made takes part in an exchange with
/// this step (the two have the same shape).
template <class Comm>
[[nodiscard]] result<> shard_agree(Comm& comm, const result<>& local) {
  const result<std::string> mine = local ? result<std::string>(std::string()) : local.error();
  auto r = shard_reduce(comm, mine, [](const std::vector<std::string>&) {
    return result<std::string>(std::string());
  });
  if (!r)
    return r.error();
  return {};
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
