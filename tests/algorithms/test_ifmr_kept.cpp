// IFMR batches kept where they lie (tensor_view::owner) against the same batches copied: the
// same search bit for bit on every kernel set and thread count (blocks that straddle two kept
// batches included), the same report statistics, no copy, the owner held until reset(), and a
// refused batch that keeps nothing. Also kernels::float_segments itself and a real mapped .npy.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../kernels/kernel_sets.hpp"
#include "ptq/algorithms/activations/ifmr.hpp"
#include "ptq/algorithms/activations/search_stats.hpp"
#include "ptq/io/npy.hpp"
#include "ptq/io/npy_map.hpp"

namespace {

using batch = std::shared_ptr<const std::vector<float>>;

/// Batches whose sizes are no multiple of the search's 4096-value blocks, two of them over the
/// 2^20 values a thread's share of the percentile selection starts at.
std::vector<batch> make_batches() {
  std::mt19937 rng(2027);
  std::normal_distribution<float> normal(0.25f, 1.5f);
  std::vector<batch> out;
  for (const std::size_t n : {700001u, 1300003u, 4097u, 1100000u}) {
    auto b = std::make_shared<std::vector<float>>(n);
    for (auto& v : *b)
      v = normal(rng);
    out.push_back(std::move(b));
  }
  return out;
}

ptq::tensor_view owned_view(const batch& b) {
  ptq::tensor_view v = ptq::view_of(b->data(), {b->size()}, "input");
  v.owner = b;
  return v;
}

/// Observes every batch: kept where it lies when keep[i], else copied.
ptq::ifmr_observer observe_all(const std::vector<batch>& batches, const std::vector<bool>& keep,
                               const ptq::ifmr_settings& s, const ptq::kernels::kernel_set& k) {
  ptq::ifmr_observer o(s, k);
  for (std::size_t i = 0; i < batches.size(); ++i) {
    const auto st = keep[i] ? o.observe(owned_view(batches[i]))
                            : o.observe(batches[i]->data(), batches[i]->size());
    REQUIRE(st.ok());
  }
  return o;
}

void require_same_search(const ptq::ifmr_search& a, const ptq::ifmr_search& b) {
  REQUIRE(a.max0 == b.max0);
  REQUIRE(a.min0 == b.min0);
  REQUIRE(a.best == b.best);
  REQUIRE(a.result.scale == b.result.scale);
  REQUIRE(a.result.offset == b.result.offset);
  REQUIRE(a.losses == b.losses);  // every summed loss, bit for bit
}

}  // namespace

TEST_CASE("IFMR: batches kept in place give the copied batches' search bit for bit",
          "[algorithms][ifmr]") {
  const auto batches = make_batches();
  const std::vector<std::vector<bool>> layouts = {
      {false, false, false, false}, {true, true, true, true}, {true, false, true, false}};
  for (const auto& k : ptq_test::available_kernel_sets()) {
    for (const double p : {0.999999, 0.99, 0.5}) {  // 0.5: the selection sorts a gathered copy
      for (const unsigned threads : {1u, 2u}) {
        ptq::ifmr_settings s;
        s.max_percentile = s.min_percentile = p;
        s.threads = threads;
        std::vector<float> all;
        for (const auto& b : batches)
          all.insert(all.end(), b->begin(), b->end());
        const auto one = ptq::ifmr_run(all.data(), all.size(), s, k);
        REQUIRE(one.ok());
        for (const auto& keep : layouts) {
          INFO("arch " << k.arch_name << ", percentile " << p << ", threads " << threads
                       << ", first kept " << keep[0]);
          const auto o = observe_all(batches, keep, s, k);
          const auto r = o.search();
          REQUIRE(r.ok());
          require_same_search(r.value(), one.value());
        }
      }
    }
  }
}

TEST_CASE("IFMR: the report statistics of kept batches are those of copied ones",
          "[algorithms][ifmr]") {
  const auto batches = make_batches();
  const auto& k = ptq::kernels::default_kernels();
  const ptq::ifmr_settings s;
  const auto copied = observe_all(batches, {false, false, false, false}, s, k);
  const auto kept = observe_all(batches, {true, false, true, true}, s, k);
  const auto a = ptq::ifmr_stats(copied, copied.search().value(), k);
  const auto b = ptq::ifmr_stats(kept, kept.search().value(), k);
  CHECK(a.count == 3104101);
  CHECK(b.count == a.count);
  CHECK(b.data_min == a.data_min);
  CHECK(b.data_max == a.data_max);
  CHECK(b.histogram == a.histogram);
  CHECK(b.candidate_loss == a.candidate_loss);
  CHECK(b.clipped_below == a.clipped_below);
  CHECK(b.clipped_above == a.clipped_above);
  CHECK(a.clipped_below + a.clipped_above > 0);
}

TEST_CASE("IFMR: a kept batch is not copied, and its owner lives until reset()",
          "[algorithms][ifmr]") {
  auto b = std::make_shared<std::vector<float>>(std::vector<float>{0.5f, -1.0f, 2.0f, 0.25f});
  const float* where = b->data();
  ptq::ifmr_observer o;
  CHECK(ptq::ifmr_observer::keeps_in_place(owned_view(b)));
  REQUIRE(o.observe(owned_view(b)).ok());  // no view of the test's own holds `b`
  REQUIRE(o.observe(b->data(), 2).ok());   // copied: no owner
  const ptq::kernels::float_segments seen = o.data();
  REQUIRE(seen.count() == 2);
  CHECK(seen.data[0] == where);  // the batch itself, not a copy
  CHECK(seen.data[1] != where);
  CHECK(seen.size() == 6);
  const auto before = o.estimate().value();
  const std::weak_ptr<const std::vector<float>> alive = b;
  b.reset();
  CHECK_FALSE(alive.expired());  // the observer holds it
  const auto after = o.estimate().value();
  CHECK(after.scale == before.scale);
  CHECK(after.offset == before.offset);
  o.reset();
  CHECK(alive.expired());
  CHECK(o.batches() == 0);

  // A view without an owner, or one that is not float32 in C order, is copied.
  std::vector<float> plain = {1.0f, 2.0f};
  CHECK_FALSE(ptq::ifmr_observer::keeps_in_place(ptq::view_of(plain.data(), {2})));
  auto wide = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4});
  ptq::tensor_view strided = owned_view(wide);
  strided.shape = {2};
  strided.strides = {2};
  CHECK_FALSE(ptq::ifmr_observer::keeps_in_place(strided));
  REQUIRE(o.observe(strided).ok());
  CHECK(o.data().data[0] != wide->data());
}

TEST_CASE("IFMR: a refused kept batch keeps nothing, its owner included", "[algorithms][ifmr]") {
  auto bad = std::make_shared<std::vector<float>>(std::vector<float>{1.0f, NAN, 2.0f});
  const std::weak_ptr<const std::vector<float>> alive = bad;
  ptq::ifmr_observer o;
  const auto st = o.observe(owned_view(bad));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::non_finite);
  CHECK(st.error().message == "activation batch 1: NaN at flat index 1");
  bad.reset();
  CHECK(alive.expired());
  CHECK(o.batches() == 0);
}

TEST_CASE("float_segments: values in order across runs, gathered only where a range straddles",
          "[algorithms][ifmr]") {
  const std::vector<float> a = {0, 1, 2}, b = {3}, c = {4, 5, 6, 7};
  ptq::kernels::float_segments s;
  s.add(a.data(), a.size());
  s.add(c.data(), 0);  // an empty run is no run
  s.add(b.data(), b.size());
  s.add(c.data(), c.size());
  REQUIRE(s.count() == 3);
  REQUIRE(s.size() == 8);
  float scratch[8] = {};
  CHECK(s.range(1, 2, scratch) == a.data() + 1);  // inside one run: where it lies
  CHECK(s.range(5, 3, scratch) == c.data() + 1);
  const float* g = s.range(2, 4, scratch);  // a[2], b[0], c[0], c[1]
  REQUIRE(g == scratch);
  CHECK(std::vector<float>(g, g + 4) == std::vector<float>{2, 3, 4, 5});
  std::vector<float> seen;
  s.for_each_part(1, 6, [&](const float* p, std::size_t n) { seen.insert(seen.end(), p, p + n); });
  CHECK(seen == std::vector<float>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("IFMR: a mapped float32 .npy batch is kept in the mapping", "[algorithms][ifmr]") {
  const auto batches = make_batches();
  const std::string path = "ptq_test_ifmr_kept_batch.npy";
  REQUIRE(ptq::io::write_npy(path, batches[0]->data(), {batches[0]->size()}).ok());
  auto mapped = ptq::io::try_map_npy(path);
  REQUIRE(mapped.ok());
  std::remove(path.c_str());  // the mapping outlives the name
  const ptq::tensor_view v = mapped.value().view();
  REQUIRE(mapped.value().zero_copy());
  REQUIRE(v.owner != nullptr);
  ptq::ifmr_observer kept, copied;
  REQUIRE(kept.observe(v).ok());
  REQUIRE(copied.observe(batches[0]->data(), batches[0]->size()).ok());
  mapped = ptq::io::try_map_npy("no such file.npy");  // drops the npy_view: the view's owner stays
  CHECK(kept.data().data[0] == v.in_place());
  require_same_search(kept.search().value(), copied.search().value());
}
