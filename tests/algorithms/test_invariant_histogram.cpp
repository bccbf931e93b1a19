// The order-invariant histogram: forward, reverse, shuffled and concatenated batches, and any
// merge tree, give identical bytes; bins merge in pairs exactly; HFMG's search runs on it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ptq/algorithms/scale_out/state_wire.hpp"

namespace {

using batches_t = std::vector<std::vector<float>>;

/// Batches whose ranges grow, shrink and jump: the width changes several times.
batches_t growing_batches() {
  std::mt19937 rng(21);
  batches_t out;
  const float scales[] = {0.01f, 1.0f, 0.5f, 30.0f, 2.0f, 1e-3f, 7.0f};
  for (std::size_t b = 0; b < 7; ++b) {
    std::normal_distribution<float> d(b == 3 ? -5.0f : 0.25f, scales[b]);
    std::vector<float> v(1000 + 313 * b);
    for (auto& x : v)
      x = d(rng);
    out.push_back(std::move(v));
  }
  return out;
}

std::string histogram_of(const batches_t& bs, const std::vector<std::size_t>& order,
                         std::size_t bins = 1024) {
  ptq::invariant_histogram h;
  for (const std::size_t b : order) {
    REQUIRE(observe(h, bs[b].data(), bs[b].size(), bins, ptq::kernels::default_kernels()).ok());
  }
  return ptq::serialize(h);
}

}  // namespace

TEST_CASE("order-invariant histogram: every order, split and merge tree, the same bytes",
          "[invariant]") {
  const batches_t bs = growing_batches();
  std::vector<std::size_t> forward(bs.size());
  std::iota(forward.begin(), forward.end(), std::size_t{0});
  const std::string ref = histogram_of(bs, forward);
  std::vector<std::size_t> reverse(forward.rbegin(), forward.rend());
  CHECK(histogram_of(bs, reverse) == ref);
  for (std::uint32_t seed = 0; seed < 5; ++seed) {
    auto shuffled = forward;
    std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(seed));
    CHECK(histogram_of(bs, shuffled) == ref);
  }
  // All batches as one.
  std::vector<float> all;
  for (const auto& b : bs)
    all.insert(all.end(), b.begin(), b.end());
  CHECK(histogram_of({all}, {0}) == ref);
  // Other batch boundaries: the concatenation cut into pieces of 777.
  batches_t cut;
  for (std::size_t i = 0; i < all.size(); i += 777)
    cut.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(i),
                     all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), i + 777)));
  std::vector<std::size_t> cut_order(cut.size());
  std::iota(cut_order.begin(), cut_order.end(), std::size_t{0});
  CHECK(histogram_of(cut, cut_order) == ref);
  // Shards merged as a tree, through the wire format.
  std::vector<ptq::invariant_histogram> parts(3);
  for (std::size_t b = 0; b < bs.size(); ++b) {
    REQUIRE(observe(parts[b % 3], bs[b].data(), bs[b].size(), 1024, ptq::kernels::default_kernels())
                .ok());
  }
  auto p2 = ptq::deserialize_invariant_histogram(ptq::serialize(parts[2]));
  REQUIRE(p2.ok());
  REQUIRE(merge(parts[1], p2.value()).ok());
  REQUIRE(merge(parts[1], parts[0]).ok());
  CHECK(ptq::serialize(parts[1]) == ref);

  auto h = ptq::deserialize_invariant_histogram(ref);
  REQUIRE(h.ok());
  std::int64_t total = 0;
  for (const auto c : h.value().counts)
    total += c;
  CHECK(total == static_cast<std::int64_t>(all.size()));  // no count split or lost
  CHECK(h.value().counts[0] > 0);
  // The width is a power of two and the window covers the data.
  const auto hh = ptq::to_hfmg_histogram(h.value());
  CHECK(hh.lo <= *std::min_element(all.begin(), all.end()));
  CHECK(hh.hi > *std::max_element(all.begin(), all.end()));
}

TEST_CASE("order-invariant histogram: exact pair merges and HFMG's search", "[invariant]") {
  const auto& k = ptq::kernels::default_kernels();
  ptq::invariant_histogram h;
  const std::vector<float> a = {0.0f, 0.75f, 1.0f, 1.5f};  // fits 4 bins of 0.5: [0, 2)
  REQUIRE(observe(h, a.data(), a.size(), 4, k).ok());
  CHECK(h.exponent == -1);
  CHECK(h.start == 0);
  CHECK(h.counts == std::vector<std::int64_t>{1, 1, 1, 1});
  const std::vector<float> b = {3.0f};  // [0, 3]: 4 bins of 1, bins (0,1) and (2,3) merge
  REQUIRE(observe(h, b.data(), b.size(), 4, k).ok());
  CHECK(h.exponent == 0);
  CHECK(h.counts == std::vector<std::int64_t>{2, 2, 0, 1});
  const std::vector<float> c = {-2.5f};  // [-2.5, 3]: width 2, bins -2..1
  REQUIRE(observe(h, c.data(), c.size(), 4, k).ok());
  CHECK(h.exponent == 1);
  CHECK(h.start == -2);
  CHECK(h.counts == std::vector<std::int64_t>{1, 0, 4, 1});
  const std::vector<float> zeros(10, 0.0f);
  ptq::invariant_histogram z;
  REQUIRE(observe(z, zeros.data(), zeros.size(), 1024, k).ok());
  CHECK(z.exponent == ptq::invariant_min_exponent);
  CHECK(z.counts[0] == 10);

  const batches_t bs = growing_batches();
  ptq::invariant_histogram g;
  for (const auto& batch : bs)
    REQUIRE(observe(g, batch.data(), batch.size(), 2048, k).ok());
  ptq::hfmg_settings s;
  s.num_of_bins = 2048;
  auto r = ptq::finalize(g, s, k);
  REQUIRE(r.ok());
  CHECK(r.value().result.scale > 0.0f);
  CHECK(r.value().clip_min < 0.0f);
  CHECK(r.value().clip_max > 0.0f);
  const std::vector<float> nan = {1.0f, std::nanf("")};
  const auto e = observe(g, nan.data(), nan.size(), 2048, k, "conv1 input batch 9").error();
  CHECK(e.code == ptq::errc::non_finite);
  CHECK(e.message.rfind("conv1 input batch 9", 0) == 0);
  CHECK(observe(g, a.data(), a.size(), 1024, k).error().code == ptq::errc::state_mismatch);
}

TEST_CASE("the state fuzzer's order-invariant seed is the pair-merge example", "[invariant]") {
  std::ifstream in(
      std::string(PTQ_TEST_DATA_DIR) + "/../../fuzz/corpus/state_fuzzer/invariant_histogram.bin",
      std::ios::binary);
  REQUIRE(in);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto h = ptq::deserialize_invariant_histogram(bytes);
  REQUIRE(h.ok());
  CHECK(h.value().exponent == 1);
  CHECK(h.value().start == -2);
  CHECK(h.value().counts == std::vector<std::int64_t>{1, 0, 4, 1});
  CHECK(ptq::serialize(h.value()) == bytes);
}
