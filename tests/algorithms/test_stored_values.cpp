// Stored values (core/stored_values.hpp): every binary16 value converts exactly, and the IFMR
// and HFMG observers given float16 batches (converted a block at a time, stored_batch.hpp) give
// the results and errors of the same observers on the converted float32 batches, bit for bit,
// for every thread count and for batches that end inside, on and just past a block.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ptq/algorithms/dispatch.hpp"

namespace {

/// binary16 bits -> value, from the definition: (-1)^s · 2^(e-15) · (1 + m/1024), or
/// 2^-14 · m/1024 for e = 0.
double half_value(std::uint16_t h) {
  const int e = (h >> 10) & 0x1F;
  const int m = h & 0x3FF;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

/// Finite float16 values of a few magnitudes, as stored bytes.
std::vector<std::uint16_t> random_halves(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint16_t> h(n);
  for (auto& v : h) {
    do {
      v = static_cast<std::uint16_t>(rng());
    } while (((v >> 10) & 0x1F) == 0x1F || ((v >> 10) & 0x1F) < 8);
  }
  return h;
}

ptq::stored_values as_stored(const std::vector<std::uint16_t>& h) {
  return {reinterpret_cast<const char*>(h.data()), h.size(), ptq::stored_type::f16};
}

std::vector<float> converted(const std::vector<std::uint16_t>& h) {
  std::vector<float> f(h.size());
  for (std::size_t i = 0; i < h.size(); ++i)
    f[i] = ptq::half_to_float(h[i]);
  return f;
}

void check_same(const ptq::result<ptq::activation_quant_result>& a,
                const ptq::result<ptq::activation_quant_result>& b) {
  REQUIRE(a.ok() == b.ok());
  if (!a.ok()) {
    CHECK(a.error().code == b.error().code);
    CHECK(a.error().message == b.error().message);
    return;
  }
  CHECK(std::memcmp(&a.value().scale, &b.value().scale, sizeof(float)) == 0);
  CHECK(a.value().offset == b.value().offset);
  CHECK(std::memcmp(&a.value().clip_min, &b.value().clip_min, sizeof(float)) == 0);
  CHECK(std::memcmp(&a.value().clip_max, &b.value().clip_max, sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("half_to_float: every binary16 value exactly", "[algorithms][stored]") {
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float f = ptq::half_to_float(h);
    const int e = (h >> 10) & 0x1F;
    CHECK(std::signbit(f) == ((h & 0x8000) != 0));
    if (e == 0x1F) {
      CHECK(std::isnan(f) == ((h & 0x3FF) != 0));
      CHECK(std::isinf(f) == ((h & 0x3FF) == 0));
    } else if (static_cast<double>(f) != half_value(h)) {
      FAIL("half 0x" << std::hex << bits << " -> " << f);
    }
  }
  // convert() of a run, at an offset, is the same value by value; float32 runs are copied.
  const std::vector<std::uint16_t> h{0x3C00, 0xC000, 0x0001, 0x7BFF, 0x8000};
  float out[3] = {};
  as_stored(h).convert(1, 3, out);
  CHECK(out[0] == -2.0F);
  CHECK(out[1] == 5.9604644775390625e-08F);
  CHECK(out[2] == 65504.0F);
  const float f32[] = {1.5F, -2.25F};
  const ptq::stored_values s{reinterpret_cast<const char*>(f32), 2, ptq::stored_type::f32};
  CHECK(s.in_place() == f32);
  CHECK(as_stored(h).in_place() == nullptr);
  CHECK(s.at(1) == -2.25F);
}

TEST_CASE("observers on float16 batches: the results of the converted batches",
          "[algorithms][stored]") {
  const std::size_t block = ptq::conversion_block;
  const std::vector<std::vector<std::uint16_t>> batches{
      random_halves(2 * block + 12345, 1), random_halves(block, 2), random_halves(block + 1, 3),
      random_halves(77, 4)};
  for (const auto algo : {ptq::activation_algo::ifmr, ptq::activation_algo::hfmg}) {
    for (const unsigned threads : {1U, 2U, 3U}) {
      ptq::activation_settings s;
      s.algo = algo;
      s.ifmr.threads = threads;
      s.hfmg.threads = threads;
      ptq::activation_observer from_halves(s), from_floats(s);
      for (const auto& b : batches) {
        REQUIRE(from_halves.observe(as_stored(b)).ok());
        REQUIRE(from_floats.observe(converted(b)).ok());
      }
      INFO("algo " << static_cast<int>(algo) << ", threads " << threads);
      check_same(from_halves.finalize(), from_floats.finalize());
    }
  }
}

TEST_CASE("observers on float16 batches: the errors of the converted batches",
          "[algorithms][stored]") {
  const std::size_t block = ptq::conversion_block;
  for (const auto algo : {ptq::activation_algo::ifmr, ptq::activation_algo::hfmg}) {
    ptq::activation_settings s;
    s.algo = algo;
    s.ifmr.threads = 2;
    s.hfmg.threads = 2;
    // A NaN in the third block, an -Inf after it: the NaN is named, at its flat index.
    auto bad = random_halves(3 * block, 5);
    bad[2 * block + 5] = 0x7E00;
    bad[2 * block + 9] = 0xFC00;
    ptq::activation_observer a(s), b(s);
    REQUIRE(a.observe(as_stored(random_halves(100, 6))).ok());
    REQUIRE(b.observe(converted(random_halves(100, 6))).ok());
    const auto ea = a.observe(as_stored(bad));
    const auto eb = b.observe(converted(bad));
    REQUIRE_FALSE(ea.ok());
    REQUIRE_FALSE(eb.ok());
    CHECK(ea.error().message == eb.error().message);
    CHECK(ea.error().message ==
          "activation batch 1: NaN at flat index " + std::to_string(2 * block + 5));
    // The failed batch is not kept: the next batch is batch 1 again, and the results agree.
    bad[2 * block + 5] = 0x3C00;
    bad[2 * block + 9] = 0x4000;
    REQUIRE(a.observe(as_stored(bad)).ok());
    REQUIRE(b.observe(converted(bad)).ok());
    check_same(a.finalize(), b.finalize());
    // An empty batch.
    const auto za = a.observe(as_stored({}));
    REQUIRE_FALSE(za.ok());
    CHECK(za.error().code == ptq::errc::empty_tensor);
    CHECK(za.error().message == "activation batch 2: empty tensor");
  }
}
