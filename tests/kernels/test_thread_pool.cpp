// parallel_blocks on the persistent pool: every block runs exactly once, on the thread the static
// assignment names, with the same workers from call to call; nested calls and calls from two user
// threads at once complete with the same results.
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "ptq/kernels/kernel_set.hpp"

namespace {

using ptq::kernels::parallel_blocks;

/// The id of the thread that ran each block.
std::vector<std::thread::id> block_threads(std::size_t nblocks, unsigned threads) {
  std::vector<std::thread::id> who(nblocks);
  std::vector<std::atomic<int>> runs(nblocks);
  parallel_blocks(nblocks, threads, [&](std::size_t b) {
    who[b] = std::this_thread::get_id();
    runs[b].fetch_add(1);
  });
  for (std::size_t b = 0; b < nblocks; ++b)
    REQUIRE(runs[b].load() == 1);
  return who;
}

}  // namespace

TEST_CASE("parallel_blocks runs each block once on its statically assigned thread", "[pool]") {
  for (const std::size_t nblocks : {0u, 1u, 2u, 3u, 7u, 100u}) {
    for (const unsigned threads : {1u, 2u, 3u, 8u}) {
      CAPTURE(nblocks, threads);
      const auto who = block_threads(nblocks, threads);
      const std::size_t nt = std::min<std::size_t>(threads, nblocks);
      for (std::size_t b = 0; b < nblocks; ++b) {
        // Thread t runs blocks t, t + nt, ...; t = 0 is the caller.
        REQUIRE(who[b] == who[b % nt]);
        if (b % nt == 0)
          REQUIRE(who[b] == std::this_thread::get_id());
      }
      std::set<std::thread::id> distinct(who.begin(), who.end());
      REQUIRE(distinct.size() == nt);
    }
  }
}

TEST_CASE("parallel_blocks reuses the same worker threads on every call", "[pool]") {
  const auto first = block_threads(4, 4);
  const auto second = block_threads(4, 4);
  REQUIRE(first == second);
  const auto fewer = block_threads(2, 2);
  REQUIRE(fewer[1] == first[1]);
}

TEST_CASE("a parallel_blocks inside a block runs on that block's thread", "[pool]") {
  std::vector<std::atomic<int>> runs(6 * 5);
  std::atomic<int> foreign{0};
  parallel_blocks(6, 3, [&](std::size_t outer) {
    const auto self = std::this_thread::get_id();
    parallel_blocks(5, 3, [&](std::size_t inner) {
      if (std::this_thread::get_id() != self)
        foreign.fetch_add(1);
      runs[outer * 5 + inner].fetch_add(1);
    });
  });
  REQUIRE(foreign.load() == 0);
  for (const auto& r : runs)
    REQUIRE(r.load() == 1);
}

TEST_CASE("parallel_blocks from two user threads at once gives every call its blocks", "[pool]") {
  constexpr std::size_t calls = 300, nblocks = 13;
  auto caller = [&](std::vector<std::size_t>& sums) {
    for (std::size_t c = 0; c < calls; ++c) {
      std::vector<std::size_t> out(nblocks);
      parallel_blocks(nblocks, 2, [&](std::size_t b) { out[b] = c * nblocks + b; });
      std::size_t s = 0;
      for (const auto v : out)
        s += v;
      sums.push_back(s);
    }
  };
  std::vector<std::size_t> a, b;
  std::thread ta(caller, std::ref(a));
  std::thread tb(caller, std::ref(b));
  ta.join();
  tb.join();
  REQUIRE(a.size() == calls);
  REQUIRE(a == b);
  for (std::size_t c = 0; c < calls; ++c)
    REQUIRE(a[c] == c * nblocks * nblocks + nblocks * (nblocks - 1) / 2);
}

TEST_CASE("parallel_histogram: the one-thread counts for every thread count", "[pool][histogram]") {
  const auto& k = ptq::kernels::default_kernels();
  const std::size_t block = ptq::kernels::parallel_block;
  for (const std::size_t n : {std::size_t{1000}, block, 3 * block + 12345}) {
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i)
      x[i] = static_cast<float>((i * 2654435761u) % 100003) * 1e-3f - 40.0f;
    std::vector<std::int64_t> want(2048, 0);
    k.histogram(x.data(), n, -40.0f, 60.0f, want.size(), want.data());
    for (const unsigned threads : {1U, 2U, 3U, 5U}) {
      INFO(n << " elements, " << threads << " threads");
      std::vector<std::int64_t> got(2048, 0);
      ptq::kernels::parallel_histogram(k, x.data(), n, -40.0f, 60.0f, got.size(), got.data(),
                                       threads);
      CHECK(got == want);
    }
  }
}

TEST_CASE("parallel_select_extremes: the reference's values for every thread count",
          "[pool][topk]") {
  const auto ref = ptq::kernels::reference_kernel_set();
  const auto& k = ptq::kernels::default_kernels();
  const std::size_t block = ptq::kernels::parallel_block;
  for (const std::size_t n : {std::size_t{5000}, 2 * block, 3 * block + 777}) {
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i)  // repeated values, so ties cross the parts
      x[i] = static_cast<float>((i * 2654435761u) % 4099) * 0.5f - 1000.0f;
    x[n / 2] = 5000.0f;  // the largest in the middle part only
    for (const std::size_t kk : {std::size_t{1}, std::size_t{17}, std::size_t{600}}) {
      const auto want = ref.select_extremes(x.data(), n, kk, kk + 3);
      for (const unsigned threads : {1U, 2U, 3U, 5U}) {
        INFO(n << " elements, k " << kk << ", " << threads << " threads");
        const auto got =
            ptq::kernels::parallel_select_extremes(k, x.data(), n, kk, kk + 3, threads);
        CHECK(got.kth_largest == want.kth_largest);
        CHECK(got.kth_smallest == want.kth_smallest);
      }
    }
  }
}

TEST_CASE("parallel_minmax: minmax's result for every thread count", "[pool][minmax]") {
  const auto& k = ptq::kernels::default_kernels();
  const std::size_t block = ptq::kernels::parallel_block;
  const std::size_t n = 3 * block + 4321;
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i)
    x[i] = static_cast<float>((i * 2654435761u) % 100003) * 1e-3f - 40.0f;
  x[block + 5] = -77.0f;  // the min in the second block, the max in the last
  x[n - 1] = 123.0f;
  // as they are, then with a NaN in block 2 and an Inf in block 1 (the first bad one wins)
  for (const int bad : {0, 1}) {
    if (bad == 1) {
      x[2 * block + 9] = std::nanf("");
      x[block + 3] = HUGE_VALF;
    }
    const auto want = k.minmax(x.data(), n);
    for (const unsigned threads : {1U, 2U, 3U, 5U}) {
      INFO(threads << " threads, bad " << bad);
      const auto got = ptq::kernels::parallel_minmax(k, x.data(), n, threads);
      CHECK(got.first_bad == want.first_bad);
      if (bad == 0) {
        CHECK(got.min == -77.0f);
        CHECK(got.max == 123.0f);
      } else {
        CHECK(got.first_bad == block + 3);
      }
    }
  }
}

namespace {
/// An engine's executor for the test: each t on a thread of its own, calls counted.
struct counting_executor {
  std::atomic<int> calls{0};
  std::atomic<int> tasks{0};
  static void run(void* self, std::size_t nt, void (*task)(void*, std::size_t), void* context) {
    auto& me = *static_cast<counting_executor*>(self);
    me.calls.fetch_add(1);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < nt; ++t) {
      threads.emplace_back([&, t] {
        me.tasks.fetch_add(1);
        task(context, t);
      });
    }
    for (auto& th : threads)
      th.join();
  }
};

/// parallel_histogram of a fixed 3.5-block input on 3 threads.
std::vector<std::int64_t> histogram_3_threads() {
  const auto& k = ptq::kernels::default_kernels();
  const std::size_t n = 3 * ptq::kernels::parallel_block + ptq::kernels::parallel_block / 2;
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i)
    x[i] = static_cast<float>((i * 2654435761u) % 100003) * 1e-3f - 40.0f;
  std::vector<std::int64_t> counts(512, 0);
  ptq::kernels::parallel_histogram(k, x.data(), n, -40.0f, 61.0f, counts.size(), counts.data(), 3);
  return counts;
}
}  // namespace

TEST_CASE("an engine's executor runs ptq's parallel work, with the same results", "[pool]") {
  const auto own_pool = histogram_3_threads();
  counting_executor ex;
  const ptq::kernels::executor e{&counting_executor::run, &ex};
  ptq::kernels::set_executor(&e);
  const auto on_executor = histogram_3_threads();
  // Nested parallel work inside a task runs on the task's thread: the executor is not re-entered.
  std::atomic<int> inner{0};
  parallel_blocks(
      2, 2, [&](std::size_t) { parallel_blocks(4, 4, [&](std::size_t) { inner.fetch_add(1); }); });
  ptq::kernels::set_executor(nullptr);
  CHECK(on_executor == own_pool);
  CHECK(ex.calls.load() == 2);  // one parallel_histogram, one outer parallel_blocks
  CHECK(ex.tasks.load() == 3 + 2);
  CHECK(inner.load() == 8);
  // Given back: the pool runs the work again, the executor sees no more calls.
  CHECK(histogram_3_threads() == own_pool);
  CHECK(ex.calls.load() == 2);
}

TEST_CASE("the pool's spinning can be turned off, with the same results", "[pool]") {
  REQUIRE(ptq::kernels::pool_spinning());
  const auto spinning = histogram_3_threads();
  ptq::kernels::set_pool_spinning(false);
  CHECK_FALSE(ptq::kernels::pool_spinning());
  const auto sleeping = histogram_3_threads();
  ptq::kernels::set_pool_spinning(true);
  CHECK(ptq::kernels::pool_spinning());
  CHECK(sleeping == spinning);
}
