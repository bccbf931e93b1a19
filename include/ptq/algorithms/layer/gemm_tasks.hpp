// The GEMM task runner of the layer arithmetic (layer_compute.hpp): a list of GEMM tiles, each
// with an optional bias, run on up to `threads` threads with one packing workspace (and one
// scratch buffer) per thread. Tiles split only the output columns, so every C element is one
// GEMM call's k-ordered sum and the result does not depend on the thread count.
// Depends on: core and kernels.
#pragma once

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <vector>

#include "ptq/core/abi.hpp"
#include "ptq/kernels/kernel_set.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

class gemm_task_runner {
 public:
  /// `threads` 0 or 1 = the calling thread only.
  explicit gemm_task_runner(const kernels::kernel_set& k, unsigned threads = 1)
      : k_(k), threads_(threads == 0 ? 1 : threads) {}

  [[nodiscard]] unsigned threads() const noexcept { return threads_; }
  void set_threads(unsigned threads) noexcept { threads_ = threads == 0 ? 1 : threads; }

  /// Forgets the tasks added so far (the workspaces stay).
  void clear() noexcept { tasks_.clear(); }

  /// Adds p (with its bias) as one task, or, when threads > 1 and the `njobs` GEMMs of this size
  /// the caller adds for this run do not spread evenly over the threads, split into column
  /// tiles: threads / gcd(njobs, threads) tiles each, so that every thread gets the same share.
  /// No more tiles than that: each tile packs A again (for a 64x1536 A that is a third of a
  /// 96-column tile's time), and the threads take tiles in a fixed order, so more tiles do not
  /// balance anything.
  void add(const kernels::gemm_problem& p, const float* row_bias, const float* col_bias,
           std::size_t njobs) {
    std::size_t cols = p.n;
    const std::size_t nt = threads_;
    if (nt > 1 && njobs % nt != 0) {
      const std::size_t tiles = nt / std::gcd(std::max<std::size_t>(njobs, 1), nt);
      const std::size_t per = (p.n + tiles - 1) / tiles;
      cols = (per + tile_align - 1) / tile_align * tile_align;
    }
    for (std::size_t j0 = 0; j0 < p.n; j0 += cols) {
      gemm_task t;
      t.p = p;
      t.p.n = std::min(cols, p.n - j0);
      if (p.b_windows != nullptr) {  // kept in the task: the caller's may not outlive run()
        t.windows = *p.b_windows;
        t.windows.j0 += j0;
        t.p.b_windows = nullptr;
        t.has_windows = true;
      } else {
        t.p.b = p.trans_b ? p.b + j0 * p.ldb : p.b + j0;
      }
      t.p.c = p.c + j0;
      t.row_bias = row_bias;
      t.col_bias = col_bias == nullptr ? nullptr : col_bias + j0;
      tasks_.push_back(t);
    }
  }

  /// Runs the tasks added since the last clear().
  void run() {
    prepare(tasks_.size(), 0);
    run_blocks(tasks_.size(), [this](std::size_t b, std::size_t t) {
      gemm_task task = tasks_[b];
      if (task.has_windows)
        task.p.b_windows = &task.windows;
      if (task.row_bias != nullptr || task.col_bias != nullptr) {
        for (std::size_t i = 0; i < task.p.m; ++i) {
          float* row = task.p.c + i * task.p.ldc;
          if (task.row_bias != nullptr) {
            std::fill(row, row + task.p.n, task.row_bias[i]);
          } else {
            std::copy(task.col_bias, task.col_bias + task.p.n, row);
          }
        }
        task.p.accumulate = true;
      }
      k_.gemm(task.p, gemm_ws_[t].data());
    });
  }

  /// Runs fn(block, thread) for block in [0, nblocks): thread t takes blocks t, t + nt, ...
  template <class Fn>
  void run_blocks(std::size_t nblocks, Fn&& fn) {
    const std::size_t nt = std::min<std::size_t>(threads_, std::max<std::size_t>(nblocks, 1));
    kernels::parallel_blocks(nt, static_cast<unsigned>(nt), [&](std::size_t t) {
      for (std::size_t b = t; b < nblocks; b += nt)
        fn(b, t);
    });
  }

  /// Sizes the per-thread workspaces for nblocks blocks (buffer_floats of buffer each).
  void prepare(std::size_t nblocks, std::size_t buffer_floats) {
    const std::size_t nt = std::min<std::size_t>(threads_, std::max<std::size_t>(nblocks, 1));
    if (gemm_ws_.size() < nt)
      gemm_ws_.resize(nt);
    if (thread_buf_.size() < nt)
      thread_buf_.resize(nt);
    for (std::size_t t = 0; t < nt; ++t) {
      gemm_ws_[t].resize(kernels::gemm_workspace_floats);
      if (thread_buf_[t].size() < buffer_floats)
        thread_buf_[t].resize(buffer_floats);
    }
  }

  /// Thread t's buffer (the padded planes of the sample it works on) and GEMM packing workspace
  /// (after prepare()).
  [[nodiscard]] float* thread_buffer(std::size_t t) noexcept { return thread_buf_[t].data(); }
  [[nodiscard]] float* gemm_workspace(std::size_t t) noexcept { return gemm_ws_[t].data(); }

 private:
  /// A GEMM tile; with a bias, C is first filled with it (per row or per column) and accumulated.
  struct gemm_task {
    kernels::gemm_problem p;
    const float* row_bias = nullptr;
    const float* col_bias = nullptr;
    kernels::gemm_windows windows;  // B's windows, when has_windows
    bool has_windows = false;
  };

  /// Tile widths are multiples of 16: whole vectors on every arch, and whole register tiles
  /// (gemm_nr: 12, 24, 32) but for one sliver per tile.
  static constexpr std::size_t tile_align = 16;

  kernels::kernel_set k_;
  unsigned threads_ = 1;
  std::vector<gemm_task> tasks_;
  std::vector<std::vector<float>> gemm_ws_;     // one packing workspace per thread
  std::vector<std::vector<float>> thread_buf_;  // one scratch buffer per thread
};

}  // namespace detail

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
