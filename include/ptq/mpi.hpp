// The MPI transport of a sharded calibration (docs/scale-out.md): `mpi_comm` is the `Comm` of
// ptq/session/shard_exchange.hpp over an MPI communicator. Optional: ptq/ptq.hpp does not
// include it and the library needs no MPI; a program that includes this header links MPI
// itself (CMake: find_package(MPI) and MPI::MPI_CXX). Messages of any size travel as chunks
// of at most 1 GiB (MPI counts are int). MPI's own failures follow the communicator's error
// handler (by default MPI aborts every rank, which exits non-zero).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// MPI_Init in the constructor, MPI_Finalize in the destructor, for a program's main.
class mpi_environment {
 public:
  /// MPI_Init without the command line (MPI-2 and later accept null arguments).
  mpi_environment() { MPI_Init(nullptr, nullptr); }
  mpi_environment(int& argc, char**& argv) { MPI_Init(&argc, &argv); }
  mpi_environment(const mpi_environment&) = delete;
  mpi_environment& operator=(const mpi_environment&) = delete;
  ~mpi_environment() { MPI_Finalize(); }
};

class mpi_comm {
 public:
  explicit mpi_comm(MPI_Comm comm = MPI_COMM_WORLD) : comm_(comm) {
    int r = 0;
    int n = 1;
    MPI_Comm_rank(comm_, &r);
    MPI_Comm_size(comm_, &n);
    rank_ = static_cast<std::size_t>(r);
    size_ = static_cast<std::size_t>(n);
  }

  [[nodiscard]] std::size_t rank() const noexcept { return rank_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

  /// Rank 0: every rank's bytes in rank order; the other ranks: an empty vector.
  [[nodiscard]] std::vector<std::string> gather(std::string_view mine) {
    if (rank_ != 0) {
      send(mine, 0);
      return {};
    }
    std::vector<std::string> all(size_);
    all[0] = std::string(mine);
    for (std::size_t r = 1; r < size_; ++r)
      all[r] = receive(static_cast<int>(r));
    return all;
  }

  /// Every rank: rank 0's `value` (the others' argument is not used).
  [[nodiscard]] std::string broadcast(std::string_view value) {
    std::uint64_t n = rank_ == 0 ? value.size() : 0;
    MPI_Bcast(&n, 1, MPI_UINT64_T, 0, comm_);
    std::string out =
        rank_ == 0 ? std::string(value) : std::string(static_cast<std::size_t>(n), '\0');
    for (std::uint64_t at = 0; at < n; at += chunk) {
      const auto len = static_cast<int>(std::min<std::uint64_t>(chunk, n - at));
      MPI_Bcast(out.data() + at, len, MPI_CHAR, 0, comm_);
    }
    return out;
  }

 private:
  static constexpr std::uint64_t chunk = std::uint64_t{1} << 30;
  static constexpr int tag = 0x5054;  // "PT"

  void send(std::string_view bytes, int to) {
    const std::uint64_t n = bytes.size();
    MPI_Send(&n, 1, MPI_UINT64_T, to, tag, comm_);
    for (std::uint64_t at = 0; at < n; at += chunk) {
      const auto len = static_cast<int>(std::min<std::uint64_t>(chunk, n - at));
      MPI_Send(bytes.data() + at, len, MPI_CHAR, to, tag, comm_);
    }
  }

  [[nodiscard]] std::string receive(int from) {
    std::uint64_t n = 0;
    MPI_Recv(&n, 1, MPI_UINT64_T, from, tag, comm_, MPI_STATUS_IGNORE);
    std::string out(static_cast<std::size_t>(n), '\0');
    for (std::uint64_t at = 0; at < n; at += chunk) {
      const auto len = static_cast<int>(std::min<std::uint64_t>(chunk, n - at));
      MPI_Recv(out.data() + at, len, MPI_CHAR, from, tag, comm_, MPI_STATUS_IGNORE);
    }
    return out;
  }

  MPI_Comm comm_;
  std::size_t rank_ = 0;
  std::size_t size_ = 1;
};

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
