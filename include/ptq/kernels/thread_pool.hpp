// A persistent pool of worker threads behind kernels::parallel_blocks.
//
// Why: starting and joining std::threads on every call costs tens of microseconds per thread,
// more than a small layer's whole kernel, so parallel_blocks used to be worth it only for large
// tensors. The pool starts its workers once (lazily, growing to the largest count asked for) and
// parks them on a condition variable between calls. A worker that has just finished, and a
// caller waiting for its workers, first spin for up to about 100 µs: AdaRound calls the pool
// several times per iteration, a millisecond apart, and a wake-up through the kernel (an
// inter-processor interrupt on a virtual machine) costs tens of microseconds each time.
//
// Determinism does not depend on the pool: parallel_blocks hands thread t the blocks t, t + nt, ...
// (a static assignment), and its callers combine per-block results in block order, so which
// thread runs a block never changes a bit. The pool only decides how fast.
//
// Calls from inside a running task (nested parallelism) and calls from a second user thread
// while the pool is busy run on the calling thread alone, which gives the same results; the pool
// never blocks one caller behind another's work.
//
// An engine with a scheduler of its own hands ptq's parallel work to it (set_executor), and one
// that shares its cores turns the spinning off (set_pool_spinning(false)); docs/calibrate.md,
// "Threads".
// Depends on: core.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace kernels {

/// An engine's own executor for ptq's parallel work. `run(self, nt, task, context)` must call
/// `task(context, t)` exactly once for each t in [0, nt), on any threads and in any order, and
/// return when every call has finished. Which thread runs which t never changes a result.
struct executor {
  void (*run)(void* self, std::size_t nt, void (*task)(void* context, std::size_t t),
              void* context) = nullptr;
  void* self = nullptr;
};

namespace detail {

/// The executor set_executor installed (nullptr: ptq's own pool).
[[nodiscard]] inline std::atomic<const executor*>& executor_slot() noexcept {
  static std::atomic<const executor*> slot{nullptr};
  return slot;
}

/// Rounds of spin_pause before a pool thread sleeps: 100 µs on the Zen 3 machine this was
/// measured on (a pause is about 25 ns there); 0 when set_pool_spinning(false).
inline constexpr int default_spin_rounds = 4000;
[[nodiscard]] inline std::atomic<int>& spin_rounds() noexcept {
  static std::atomic<int> rounds{default_spin_rounds};
  return rounds;
}

class thread_pool {
 public:
  using task_fn = void (*)(void* context, std::size_t thread_index);

  thread_pool() = default;
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  ~thread_pool() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    for (auto& worker : workers_)
      worker.join();
  }

  /// The process-wide pool (one per ABI namespace; started on first use).
  [[nodiscard]] static thread_pool& instance() {
    static thread_pool pool;
    return pool;
  }

  /// Runs task(context, t) for t in [0, nt): t = 0 on the calling thread, the others on workers.
  /// Returns when every t has finished. Runs them all on the caller when the pool is busy or the
  /// caller is itself inside a task.
  void run(std::size_t nt, task_fn task, void* context) {
    const bool on_caller = nt <= 1 || in_task();
    const executor* e = executor_slot().load(std::memory_order_acquire);
    if (!on_caller && e != nullptr && e->run != nullptr) {
      run_on(*e, nt, task, context);
      return;
    }
    if (on_caller || !run_mutex_.try_lock()) {
      for (std::size_t t = 0; t < nt; ++t)
        task(context, t);
      return;
    }
    const std::lock_guard<std::mutex> run_lock(run_mutex_, std::adopt_lock);
    {
      std::unique_lock<std::mutex> lock(mutex_);
      while (workers_.size() < nt - 1) {
        const std::size_t index = workers_.size() + 1;
        workers_.emplace_back([this, index] { work(index); });
      }
      task_ = task;
      context_ = context;
      active_ = nt;
      pending_ = nt - 1;
      ++generation_;
    }
    work_cv_.notify_all();
    // Waits for the workers even if the caller's share unwinds: they use `context`, which
    // lives in the caller's frame.
    const wait_for_workers wait{*this};
    task(context, 0);
  }

 private:
  /// Marks the thread as inside a task for its lifetime (nested calls then run inline).
  struct task_scope {
    bool was = in_task();
    task_scope() noexcept { in_task() = true; }
    task_scope(const task_scope&) = delete;
    task_scope& operator=(const task_scope&) = delete;
    ~task_scope() { in_task() = was; }
  };

  /// The engine's executor runs the tasks; each runs as inside a task, so the parallel calls it
  /// makes itself run on its thread and never reach the executor again.
  static void run_on(const executor& e, std::size_t nt, task_fn task, void* context) {
    struct call {
      task_fn task;
      void* context;
    } c{task, context};
    e.run(
        e.self, nt,
        [](void* p, std::size_t t) {
          const auto& cc = *static_cast<const call*>(p);
          const task_scope inside;
          cc.task(cc.context, t);
        },
        &c);
  }

  struct wait_for_workers {
    thread_pool& pool;
    explicit wait_for_workers(thread_pool& p) noexcept : pool(p) { in_task() = true; }
    wait_for_workers(const wait_for_workers&) = delete;
    wait_for_workers& operator=(const wait_for_workers&) = delete;
    ~wait_for_workers() {
      in_task() = false;
      const int rounds = spin_rounds().load(std::memory_order_relaxed);
      for (int i = 0; i < rounds && pool.pending_.load(std::memory_order_acquire) != 0; ++i)
        spin_pause();
      std::unique_lock<std::mutex> lock(pool.mutex_);
      pool.done_cv_.wait(lock, [this] { return pool.pending_ == 0; });
    }
  };

  static void spin_pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
  }

  [[nodiscard]] static bool& in_task() noexcept {
    thread_local bool inside = false;
    return inside;
  }

  void work(std::size_t index) {
    in_task() = true;
    std::uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (!stopping_ && generation_ == seen) {  // spin a little before sleeping
        lock.unlock();
        const int rounds = spin_rounds().load(std::memory_order_relaxed);
        for (int i = 0; i < rounds && generation_.load(std::memory_order_acquire) == seen; ++i)
          spin_pause();
        lock.lock();
      }
      work_cv_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_)
        return;
      seen = generation_;
      if (index >= active_)
        continue;  // this call needs fewer threads
      const task_fn task = task_;
      void* const context = context_;
      lock.unlock();
      task(context, index);
      lock.lock();
      if (--pending_ == 0)
        done_cv_.notify_one();
    }
  }

  std::mutex run_mutex_;  // one call at a time owns the workers
  std::mutex mutex_;      // guards everything below
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::vector<std::thread> workers_;
  task_fn task_ = nullptr;
  void* context_ = nullptr;
  std::size_t active_ = 0;
  // Changed under mutex_ only; atomic so that a spinning thread may read them without it.
  std::atomic<std::size_t> pending_{0};
  std::atomic<std::uint64_t> generation_{0};
  bool stopping_ = false;
};

}  // namespace detail

/// Hands ptq's parallel work (every parallel_blocks call: the threads of IFMR, HFMG, AdaRound,
/// the session's layers) to `e` instead of ptq's own pool; nullptr gives it back. `e` must
/// outlive every call that may use it. Results do not change.
inline void set_executor(const executor* e) noexcept {
  detail::executor_slot().store(e, std::memory_order_release);
}

/// Whether the threads of ptq's own pool spin for about 100 µs before they sleep (on by
/// default: AdaRound calls the pool about every millisecond, and a wake-up through the kernel
/// costs tens of microseconds). Off for an engine whose cores are busy with its own work.
inline void set_pool_spinning(bool on) noexcept {
  detail::spin_rounds().store(on ? detail::default_spin_rounds : 0, std::memory_order_relaxed);
}
[[nodiscard]] inline bool pool_spinning() noexcept {
  return detail::spin_rounds().load(std::memory_order_relaxed) != 0;
}

}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
