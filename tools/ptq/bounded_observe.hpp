// `ptq observe --memory bounded`: the two-pass observer of one activation over .npy batch files,
// each file read again in every pass instead of kept, so memory is one batch plus the states
// (ptq/algorithms/scale_out/two_pass_observer.hpp). IFMR needs the element count before pass 1 (its
// percentile ranks depend on it): a first, counting read of the files. Also
// `--order-invariant` (HFMG on invariant_histogram.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "numeric_io.hpp"
#include "ptq/algorithms/activation_observer.hpp"
#include "ptq/algorithms/activations/invariant_histogram.hpp"
#include "ptq/algorithms/scale_out/two_pass_observer.hpp"

namespace ptq_cli {

/// Whether a --memory value (one-pass, bounded) asks for the two passes.
[[nodiscard]] inline bool is_bounded(const std::string& memory) noexcept {
  return memory == "bounded";
}

/// Both passes over `paths`; the result, or the exit code after printing the error.
[[nodiscard]] inline ptq::result<ptq::activation_quant_result> observe_bounded(
    const ptq::activation_settings& s, const std::vector<std::string>& paths,
    const std::string& cmd, int& exit_code) {
  exit_code = exit_error;
  const auto fail = [&](const std::string& path, const ptq::error& e) {
    numeric_fail(cmd, e, path);
    return e;
  };
  std::uint64_t total = 0;
  if (s.algo == ptq::activation_algo::ifmr) {
    for (const auto& path : paths) {
      auto t = load_tensor(path, cmd);
      if (!t)
        return ptq::make_error(ptq::errc::read_failed, path);
      total += t->size();
    }
  }
  return ptq::with_activation_policy(
      s.algo, [&](auto policy) -> ptq::result<ptq::activation_quant_result> {
        using P = decltype(policy);
        ptq::two_pass_observer<P> obs(ptq::settings_for<P>(s), numeric_kernels());
        if (auto st = obs.begin(total); !st)
          return fail("", st.error());
        for (int pass = 1; pass <= 2; ++pass) {
          for (std::size_t b = 0; b < paths.size(); ++b) {
            auto t = load_tensor(paths[b], cmd);
            if (!t)
              return ptq::make_error(ptq::errc::read_failed, paths[b]);
            if (auto st = obs.observe(b, t->data(), t->size()); !st)
              return fail(paths[b], st.error());
          }
          if (pass == 1) {
            if (auto st = obs.next_pass(); !st)
              return fail("", st.error());
          }
        }
        auto r = obs.finalize();
        if (!r)
          return fail("", r.error());
        exit_code = exit_ok;
        return r;
      });
}

/// `--order-invariant`: HFMG on the order-invariant histogram (invariant_histogram.hpp), one
/// pass; the result, or the exit code after printing the error.
[[nodiscard]] inline ptq::result<ptq::activation_quant_result> observe_order_invariant(
    const ptq::hfmg_settings& s, const std::vector<std::string>& paths, const std::string& cmd,
    int& exit_code) {
  exit_code = exit_error;
  ptq::invariant_histogram h;
  for (std::size_t b = 0; b < paths.size(); ++b) {
    auto t = load_tensor(paths[b], cmd);
    if (!t)
      return ptq::make_error(ptq::errc::read_failed, paths[b]);
    auto st = ptq::observe(h, t->data(), t->size(), s.num_of_bins, numeric_kernels(),
                           "activation batch " + std::to_string(b + 1));
    if (!st) {
      numeric_fail(cmd, st.error(), paths[b]);
      return st.error();
    }
  }
  auto r = ptq::finalize(h, s, numeric_kernels());
  if (!r) {
    numeric_fail(cmd, r.error());
    return r.error();
  }
  exit_code = exit_ok;
  return r.value().result;
}

}  // namespace ptq_cli
