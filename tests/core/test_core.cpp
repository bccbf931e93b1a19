// Core numerics (docs/numerics.md, Conventions and FORCE_FP16_QUANT): grid, min/max kernel (with
// the four-row test vector), process_scale, rounding, FP16 scale rounding and the s19 truncation.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ptq/core.hpp"

namespace {
std::uint32_t bits_of(float f) {
  std::uint32_t b = 0;
  std::memcpy(&b, &f, 4);
  return b;
}
}  // namespace

TEST_CASE("grid of n bits", "[core]") {
  CHECK(ptq::make_grid(8).qmin == -128);
  CHECK(ptq::make_grid(8).qmax == 127);
  CHECK(ptq::make_grid(16).qmin == -32768);
  CHECK(ptq::make_grid(16).qmax == 32767);
  CHECK(ptq::make_grid(4).qmin == -8);
  CHECK(ptq::make_grid(6).qmax == 31);
  CHECK_FALSE(ptq::valid_bits(1));
  CHECK_FALSE(ptq::valid_bits(17));
}

TEST_CASE("round half to even", "[core]") {
  CHECK(ptq::round_half_even(2.5f) == 2.0f);
  CHECK(ptq::round_half_even(3.5f) == 4.0f);
  CHECK(ptq::round_half_even(-0.5f) == 0.0f);
  CHECK(ptq::round_half_even(-1.5f) == -2.0f);
  CHECK(ptq::round_half_even(0.49999997f) == 0.0f);
}

TEST_CASE("min/max kernel: symmetric divisor rule", "[core]") {
  // tie |max| == |min| divides by 127 (the toolkit's Python)
  auto tie = ptq::min_max_params(1.0f, -1.0f, 8, false);
  REQUIRE(tie.ok());
  CHECK(tie.value().scale == 1.0f / 127.0f);
  CHECK(tie.value().offset == 0);
  // negative side dominates: 128
  auto neg = ptq::min_max_params(0.5f, -1.0f, 8, false);
  CHECK(neg.value().scale == 1.0f / 128.0f);
  auto pos = ptq::min_max_params(2.0f, -1.0f, 8, false);
  CHECK(pos.value().scale == 2.0f / 127.0f);
  auto n16 = ptq::min_max_params(0.0f, -3.0f, 16, false);
  CHECK(n16.value().scale == 3.0f / 32768.0f);
}

TEST_CASE("min/max kernel: golden per-channel asymmetric rows", "[core][golden]") {
  // rows [-1]*12, [0]*12, [1]*12, [-1,0,1]*4 -> (max, min)
  const float mx[4] = {-1.0f, 0.0f, 1.0f, 1.0f};
  const float mn[4] = {-1.0f, 0.0f, 1.0f, -1.0f};
  const float want_scale[4] = {1.0f / 255.0f, 1.0f, 1.0f / 255.0f, 2.0f / 255.0f};
  const std::int32_t want_offset[4] = {127, -128, -128, -1};
  for (int r = 0; r < 4; ++r) {
    auto p = ptq::min_max_params(mx[r], mn[r], 8, true);
    REQUIRE(p.ok());
    CHECK(p.value().scale == want_scale[r]);
    CHECK(p.value().offset == want_offset[r]);
  }
  // the -1 comes from float32: -1 / (2/255) = -127.4999924
  CHECK(-1.0f / (2.0f / 255.0f) == Approx(-127.4999924).epsilon(1e-9));
}

TEST_CASE("min/max kernel: golden per-channel symmetric rows", "[core][golden]") {
  const float mx[4] = {-1.0f, 0.0f, 1.0f, 1.0f};
  const float mn[4] = {-1.0f, 0.0f, 1.0f, -1.0f};
  const float want[4] = {1.0f / 127.0f, 1.0f, 1.0f / 127.0f, 1.0f / 127.0f};
  for (int r = 0; r < 4; ++r) {
    auto p = ptq::min_max_params(mx[r], mn[r], 8, false);
    REQUIRE(p.ok());
    CHECK(p.value().scale == want[r]);
    CHECK(p.value().offset == 0);
    CHECK(std::fabs(p.value().scale - (r == 1 ? 1.0f : 0.007844f)) < 1e-4f);
  }
}

TEST_CASE("process_scale", "[core]") {
  auto tiny = ptq::process_scale(1e-8f, 5.0f, true, 8);
  REQUIRE(tiny.ok());
  CHECK(tiny.value().scale == 1.0f);
  CHECK(tiny.value().offset == -128);
  auto tiny_sym = ptq::process_scale(1e-8f, 0.0f, false, 16);
  CHECK(tiny_sym.value().scale == 1.0f);
  CHECK(tiny_sym.value().offset == 0);
  // threshold is FLT_EPSILON = 2^-23, absolute
  CHECK(ptq::process_scale(FLT_EPSILON, 0.0f, false, 8).value().scale == FLT_EPSILON);
  CHECK(ptq::process_scale(std::nextafter(FLT_EPSILON, 0.0f), 0.0f, false, 8).value().scale ==
        1.0f);
  auto inf = ptq::process_scale(HUGE_VALF, 0.0f, false, 8);
  REQUIRE_FALSE(inf.ok());
  CHECK(inf.error().code == ptq::errc::invalid_scale);
  CHECK_FALSE(ptq::process_scale(std::nanf(""), 0.0f, false, 8).ok());
  // offsets round half to even
  CHECK(ptq::process_scale(1.0f, 2.5f, true, 8).value().offset == 2);
  CHECK(ptq::process_scale(1.0f, -0.5000076f, true, 8).value().offset == -1);
}

TEST_CASE("clip range of activation params", "[core]") {
  const auto c = ptq::clip_range_of(ptq::quant_params{0.5f, -128, 8});
  CHECK(c.clip_min == 0.0f);
  CHECK(c.clip_max == 127.5f);
  const auto s = ptq::clip_range_of(ptq::quant_params{1.0f, 0, 8});
  CHECK(s.clip_min == -128.0f);
  CHECK(s.clip_max == 127.0f);
}

TEST_CASE("binary16 rounding", "[core][fp16]") {
  CHECK(ptq::round_to_fp16(1.0) == 1.0);
  CHECK(ptq::round_to_fp16(0.1) == 0.0999755859375);
  CHECK(ptq::round_to_fp16(1.0 + std::ldexp(1.0, -11)) == 1.0);  // tie -> even
  CHECK(ptq::round_to_fp16(1.0 + 3 * std::ldexp(1.0, -11)) == 1.0 + std::ldexp(1.0, -9));
  CHECK(ptq::round_to_fp16(65504.0) == 65504.0);
  CHECK(ptq::round_to_fp16(65519.0) == 65504.0);
  CHECK(std::isinf(ptq::round_to_fp16(65520.0)));
  CHECK(ptq::round_to_fp16(1e-5) == 168 * std::ldexp(1.0, -24));  // subnormal quantum 2^-24
  CHECK(ptq::round_to_fp16(std::ldexp(1.0, -25)) == 0.0);         // tie with 0 -> 0
  CHECK(ptq::round_to_fp16(3 * std::ldexp(1.0, -26)) == std::ldexp(1.0, -24));
}

TEST_CASE("FORCE_FP16_QUANT scale rounding", "[core][fp16]") {
  CHECK(ptq::fp16_scale(1.0f) == 1.0f);
  CHECK(ptq::fp16_scale(0.1f) == 0.0999755859375f);
  CHECK(ptq::fp16_scale(65504.0f) == 65504.0f);
  // above the fp16 range: r = fp16(sqrt(s)), s = r*r in float32
  CHECK(ptq::fp16_scale(70000.0f) == 264.5f * 264.5f);
  CHECK(ptq::fp16_scale(1e6f) == 1e6f);
  // below 2^-14
  const float r = 0.0010004043579101562f;  // fp16(0.001)
  CHECK(ptq::fp16_scale(1e-6f) == r * r);
  const float rs = static_cast<float>(168 * std::ldexp(1.0, -24));  // fp16(1e-5), subnormal
  CHECK(ptq::fp16_scale(1e-10f) == rs * rs);
  // 2^-14 itself is in range
  CHECK(ptq::fp16_scale(6.103515625e-05f) == 6.103515625e-05f);
}

TEST_CASE("s19 truncation", "[core]") {
  CHECK(ptq::truncate_s19(1.0f) == 1.0f);
  CHECK(ptq::truncate_s19(1.0f + std::ldexp(1.0f, -11)) == 1.0f);
  CHECK(ptq::truncate_s19(1.0f + std::ldexp(1.0f, -10)) == 1.0f + std::ldexp(1.0f, -10));
  CHECK(bits_of(ptq::truncate_s19(-3.14159f)) == (bits_of(-3.14159f) & 0xFFFFE000u));
  CHECK(ptq::truncate_s19(-1.999f) < 0.0f);
}

TEST_CASE("numeric_result and value_or_throw", "[core]") {
  ptq::result<int> ok = 3;
  CHECK(ok.ok());
  CHECK(ptq::value_or_throw(ok) == 3);
  ptq::result<int> bad = ptq::make_error(ptq::errc::empty_tensor, "x");
  CHECK_FALSE(bad.ok());
  CHECK(bad.error().code == ptq::errc::empty_tensor);
  CHECK_THROWS_AS(ptq::value_or_throw(bad), ptq::exception);
  CHECK(std::string(ptq::to_string(ptq::errc::non_finite)) == "non_finite");
}
