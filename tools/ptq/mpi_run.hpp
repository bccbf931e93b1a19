// What the tool's `--mpi` runs share: the error without MPI; with MPI (PTQ_WITH_MPI) the transport
// (ptq/mpi.hpp), quiet ranks, and `ptq observe --mpi`: one activation's two passes over the
// .npy batches of every rank (observe_sharded in ptq/algorithms/scale_out/two_pass_exchange.hpp).
#pragma once

#include "ptq/core/error.hpp"

namespace ptq_cli {

/// `--mpi` in a ptq built without MPI (E1106).
[[nodiscard]] inline ptq::error mpi_unavailable() {
  return ptq::make_error(ptq::errc::mpi_unavailable,
                         "this ptq was built without MPI: --mpi is not available",
                         "install libopenmpi-dev openmpi-bin and rebuild (PTQ_WITH_MPI, "
                         "docs/scale-out.md)");
}

}  // namespace ptq_cli

#if PTQ_WITH_MPI

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "numeric_io.hpp"
#include "ptq/algorithms/activation_observer.hpp"
#include "ptq/algorithms/scale_out/two_pass_exchange.hpp"
#include "ptq/mpi.hpp"

namespace ptq_cli {

/// Silences std::cout and std::cerr while it lives: the ranks other than 0 print nothing, rank
/// 0 prints every rank's error once.
struct silenced_streams {
  std::streambuf* out = nullptr;
  std::streambuf* err = nullptr;
  explicit silenced_streams(bool on) {
    if (on) {
      out = std::cout.rdbuf(nullptr);
      err = std::cerr.rdbuf(nullptr);
    }
  }
  silenced_streams(const silenced_streams&) = delete;
  silenced_streams& operator=(const silenced_streams&) = delete;
  ~silenced_streams() {
    if (out != nullptr) {
      std::cout.rdbuf(out);
      std::cerr.rdbuf(err);
      std::cout.clear();
      std::cerr.clear();
    }
  }
};

/// `ptq observe --mpi`: rank r of R observes the batches b % R == r; every rank gets the
/// result (rank 0 prints it), or the lowest failing rank's error.
[[nodiscard]] inline ptq::result<ptq::activation_quant_result> observe_mpi(
    const ptq::activation_settings& s, const std::vector<std::string>& paths, ptq::mpi_comm& comm) {
  const auto& k = numeric_kernels();
  ptq::result<> local;
  std::uint64_t total = 0;
  if (s.algo == ptq::activation_algo::ifmr) {  // IFMR's ranks need N: every file's count
    for (const auto& path : paths) {
      auto t = try_load_tensor(path);
      if (!t) {
        local = t.error();
        break;
      }
      total += t.value().size();
    }
  }
  return ptq::with_activation_policy(
      s.algo, [&](auto policy) -> ptq::result<ptq::activation_quant_result> {
        using P = decltype(policy);
        ptq::two_pass_observer<P> o(ptq::settings_for<P>(s), k, "activation");
        const auto feed = [&](ptq::two_pass_observer<P>& obs) -> ptq::result<> {
          if (!local)
            return local;
          for (std::size_t b = comm.rank(); b < paths.size(); b += comm.size()) {
            auto t = try_load_tensor(paths[b]);
            if (!t)
              return t.error();
            if (auto st = obs.observe(b, t.value().data(), t.value().size()); !st)
              return ptq::make_error(st.error().code, paths[b] + ": " + st.error().message);
          }
          return {};
        };
        return ptq::observe_sharded(o, comm, total == 0 ? 1 : total, feed, k);
      });
}

}  // namespace ptq_cli

#endif
