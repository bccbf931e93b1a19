// Every SIMD kernel equals its scalar reference bit for bit, for every arch this machine runs
// (baseline, AVX2+FMA, AVX-512), on sizes 0..1000 and odd alignments.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "kernel_sets.hpp"
#include "ptq/kernels.hpp"

namespace {

using ptq::kernels::kernel_set;

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}
bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

/// A buffer with 3 spare floats in front so data can start at an odd offset.
struct buffer {
  std::vector<float> storage;
  float* at(std::size_t off) { return storage.data() + off; }
};

/// Data that exercises the kernels: a mix of normal values, exact grid points and ties.
std::vector<float> mixed_data(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::uniform_int_distribution<int> pick(0, 9);
  std::uniform_int_distribution<int> grid(-300, 300);
  std::vector<float> v(n);
  for (auto& x : v) {
    const int p = pick(rng);
    if (p < 6) {
      x = nd(rng);
    } else if (p < 8) {
      x = static_cast<float>(grid(rng)) * 0.05f;  // grid points / half-way ties for some scales
    } else if (p < 9) {
      x = static_cast<float>(grid(rng)) * 0.5f;
    } else {
      x = 0.0f;
    }
  }
  return v;
}

const std::size_t offsets[] = {0, 1, 2, 3};

}  // namespace

TEST_CASE("the machine's kernel sets", "[kernels]") {
  const auto sets = ptq_test::available_kernel_sets();
  REQUIRE_FALSE(sets.empty());
  for (const auto& k : sets)
    INFO(k.arch_name);
  CHECK(std::string(sets.front().arch_name).size() > 0);
}

TEST_CASE("minmax and absmax equal the reference", "[kernels]") {
  const kernel_set ref = ptq::kernels::reference_kernel_set();
  std::mt19937 rng(1234);
  for (const auto& k : ptq_test::available_kernel_sets()) {
    INFO("arch " << k.arch_name);
    // Every length to 1000, and lengths of several 512-value blocks, where the SIMD kernels
    // count one block while they bin the next.
    std::vector<std::size_t> lengths(1001);
    std::iota(lengths.begin(), lengths.end(), std::size_t{0});
    lengths.insert(lengths.end(), {1024, 1541, 4099});
    for (std::size_t n : lengths) {
      const auto data = mixed_data(n + 3, rng);
      for (std::size_t off : offsets) {
        const float* x = data.data() + off;
        const std::size_t len = n;
        const auto a = ref.minmax(x, len);
        const auto b = k.minmax(x, len);
        REQUIRE(a.first_bad == b.first_bad);
        REQUIRE(same_bits(a.min, b.min));
        REQUIRE(same_bits(a.max, b.max));
        REQUIRE(same_bits(ref.absmax(x, len), k.absmax(x, len)));
      }
    }
  }
}

TEST_CASE("minmax finds the first NaN or Inf", "[kernels]") {
  std::mt19937 rng(99);
  for (const auto& k : ptq_test::available_kernel_sets()) {
    INFO("arch " << k.arch_name);
    for (std::size_t n : {1u, 7u, 16u, 33u, 64u, 65u, 200u, 1000u}) {
      auto data = mixed_data(n, rng);
      for (std::size_t pos : {std::size_t{0}, n / 3, n - 1}) {
        for (float bad : {std::nanf(""), HUGE_VALF, -HUGE_VALF}) {
          auto d = data;
          d[pos] = bad;
          if (pos + 1 < n)
            d[n - 1] = std::nanf("");  // a later bad value must not win
          const auto r = k.minmax(d.data(), n);
          REQUIRE(r.first_bad == pos);
          REQUIRE(r.first_bad == ptq::kernels::minmax_ref(d.data(), n).first_bad);
        }
      }
    }
    const auto empty = k.minmax(nullptr, 0);
    CHECK(empty.first_bad == 0);
  }
}

TEST_CASE("minmax of huge finite values is the reference's (no false NaN/Inf)", "[kernels]") {
  // Sums of these overflow to Inf: the sse2 finiteness check adds the values, and must then
  // fall back to the reference rather than report a bad element.
  std::vector<float> x(4096);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = (i % 3 == 0 ? -1.0f : 1.0f) * (FLT_MAX - static_cast<float>(i % 7) * 1e31f);
  const auto want = ptq::kernels::minmax_ref(x.data(), x.size());
  REQUIRE(want.first_bad == x.size());
  for (const auto& k : ptq_test::available_kernel_sets()) {
    INFO("arch " << k.arch_name);
    const auto r = k.minmax(x.data(), x.size());
    CHECK(r.first_bad == x.size());
    CHECK(same_bits(r.min, want.min));
    CHECK(same_bits(r.max, want.max));
  }
}

TEST_CASE("histogram equals the reference", "[kernels]") {
  const kernel_set ref = ptq::kernels::reference_kernel_set();
  std::mt19937 rng(7);
  for (const auto& k : ptq_test::available_kernel_sets()) {
    INFO("arch " << k.arch_name);
    // Every length to 1000, and lengths of several 512-value blocks, where the SIMD kernels
    // count one block while they bin the next.
    std::vector<std::size_t> lengths(1001);
    std::iota(lengths.begin(), lengths.end(), std::size_t{0});
    lengths.insert(lengths.end(), {1024, 1541, 4099});
    for (std::size_t n : lengths) {
      const auto data = mixed_data(n + 3, rng);
      for (std::size_t off : offsets) {
        const float* x = data.data() + off;
        const auto mm = ref.minmax(x, n);
        for (std::size_t bins : {1024u, 4096u}) {
          // the data's own range, a wider range, a narrower one (values outside are ignored)
          const float ranges[3][2] = {
              {mm.min, mm.max}, {mm.min - 1.0f, mm.max + 0.5f}, {mm.min * 0.5f, mm.max * 0.5f}};
          for (const auto& r : ranges) {
            if (n == 0)
              continue;
            std::vector<std::int64_t> a(bins, 0), b(bins, 0);
            ref.histogram(x, n, r[0], r[1], bins, a.data());
            k.histogram(x, n, r[0], r[1], bins, b.data());
            REQUIRE(a == b);
          }
        }
      }
    }
    // constant data: everything in bin B/2
    std::vector<float> c(100, 3.25f);
    std::vector<std::int64_t> h(2048, 0);
    k.histogram(c.data(), c.size(), 3.25f, 3.25f, 2048, h.data());
    CHECK(h[1024] == 100);
  }
}

TEST_CASE("histogram: one bin counted past the 16-bit sub-histograms' range", "[kernels]") {
  // 300,001 values, 3 in 4 of them 1.0 (bin 2048 of 4096 over [0, 2]): each of the kernels'
  // two 16-bit sub-histograms sees that bin about 112,500 times, so they must be flushed into
  // the 64-bit counts before a counter wraps.
  std::vector<float> x(300001);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = i % 4 == 3 ? static_cast<float>(i % 1000) * 0.002f : 1.0f;
  std::vector<std::int64_t> want(4096, 0);
  ptq::kernels::histogram_ref(x.data(), x.size(), 0.0f, 2.0f, want.size(), want.data());
  REQUIRE(want[2048] == 225001);  // the 1.0s (no spread value is 1.0: i % 1000 is odd)
  for (const auto& k : ptq_test::available_kernel_sets()) {
    INFO("arch " << k.arch_name);
    std::vector<std::int64_t> h(4096, 0);
    k.histogram(x.data(), x.size(), 0.0f, 2.0f, h.size(), h.data());
    CHECK(h == want);
  }
}

TEST_CASE("histogram of a range wider than FLT_MAX / B: bins computed in double", "[kernels]") {
  // Over [-2^121, 2^121] with 2048 bins, (x - lo) * B reaches 2^133, past FLT_MAX: each value
  // goes to floor((x + 2^121) / 2^111), so 0 to bin 1024, 2^120 to bin 1536, -2^120 to bin 512,
  // the ends to bins 0 and 2047 (as the float32 binning would put them, had it room).
  const float e = std::ldexp(1.0f, 120);
  std::vector<float> x;
  for (int rep = 0; rep < 100; ++rep)  // more than a SIMD block of 256 values
    for (float v : {-2.0f * e, -e, 0.0f, e, 2.0f * e})
      x.push_back(v);
  for (const auto& k : ptq_test::available_kernel_sets()) {
    INFO("arch " << k.arch_name);
    std::vector<std::int64_t> h(2048, 0);
    k.histogram(x.data(), x.size(), -2.0f * e, 2.0f * e, h.size(), h.data());
    std::vector<std::int64_t> want(2048, 0);
    for (std::size_t b : {0u, 512u, 1024u, 1536u, 2047u})
      want[b] = 100;
    CHECK(h == want);
  }
  // The largest range a float holds: hi - lo is infinite in float32, not in double.
  const float values[] = {-FLT_MAX, 0.0f, FLT_MAX};
  std::vector<std::int64_t> h(4, 0);
  ptq::kernels::reference_kernel_set().histogram(values, 3, -FLT_MAX, FLT_MAX, 4, h.data());
  CHECK(h == std::vector<std::int64_t>{1, 0, 1, 1});
}

TEST_CASE("fused_madd rounds once on every arch that has it", "[kernels]") {
  // The IFMR quotient, the HFMG bin arithmetic and the GEMM rely on it; xsimd 8.1's own fma is a
  // multiply then an add on avx512f, which made those kernels wrong there.
  const auto cpu = xsimd::available_architectures();
  std::vector<std::pair<const char*, ptq_test::fused_madd_probe>> probes;
  if (cpu.fma3_avx2)
    probes.emplace_back("fma3+avx2", ptq_test::avx2_fused_madd_probe());
  if (cpu.avx512f)
    probes.emplace_back("avx512f", ptq_test::avx512_fused_madd_probe());
  for (const auto& [arch, p] : probes) {
    INFO("arch " << arch);
    CHECK(p.madd == 0x1p-24f);
    CHECK(p.nmadd == -0x1p-24f);
  }
}

TEST_CASE("fused candidate MSE equals the reference", "[kernels]") {
  const kernel_set ref = ptq::kernels::reference_kernel_set();
  std::mt19937 rng(42);
  const std::vector<ptq::kernels::mse_candidate> cand = {
      {-2.0f, 2.0f, 4.0f / 255.0f}, {-1.0f, 0.5f, 0.1f}, {-0.5f, 3.0f, 0.05f},
      {-4.0f, 4.0f, 0.1f},          {0.0f, 1.0f, 1.0f},  {-8.0f, 8.0f, 1.0f / 32.0f},
      {-0.1f, 0.1f, 0.0007874f}};
  for (const auto& k : ptq_test::available_kernel_sets()) {
    INFO("arch " << k.arch_name);
    // Every length to 1000, and lengths of several 512-value blocks, where the SIMD kernels
    // count one block while they bin the next.
    std::vector<std::size_t> lengths(1001);
    std::iota(lengths.begin(), lengths.end(), std::size_t{0});
    lengths.insert(lengths.end(), {1024, 1541, 4099});
    for (std::size_t n : lengths) {
      const auto data = mixed_data(n + 3, rng);
      for (std::size_t off : offsets) {
        const float* x = data.data() + off;
        std::vector<double> a(cand.size()), b(cand.size());
        ref.candidate_mse(x, n, cand.data(), cand.size(), a.data());
        k.candidate_mse(x, n, cand.data(), cand.size(), b.data());
        for (std::size_t c = 0; c < cand.size(); ++c)
          REQUIRE(same_bits(a[c], b[c]));
      }
    }
  }
}

TEST_CASE("fused candidate MSE equals the reference at half-integer quotients", "[kernels]") {
  // The SIMD pass may take x·RN(1/s) for the quotient and prove it right afterwards; data a few
  // ulp from (k + 1/2)·s is where that proof has to reject chunks (a wrong bound fails here).
  const kernel_set ref = ptq::kernels::reference_kernel_set();
  std::mt19937 rng(8);
  for (const auto& k : ptq_test::available_kernel_sets()) {
    INFO("arch " << k.arch_name);
    for (int it = 0; it < 200; ++it) {
      const int bits = it % 3 == 0 ? 16 : 8;
      const float hi = std::uniform_real_distribution<float>(0.01f, 100.0f)(rng);
      const float lo = -std::uniform_real_distribution<float>(0.0f, 100.0f)(rng);
      std::vector<ptq::kernels::mse_candidate> cand;
      for (int c = 0; c < 9; ++c) {
        const float top = hi * (0.8f + 0.05f * static_cast<float>(c));
        cand.push_back({lo, top, (top - lo) / static_cast<float>((1 << bits) - 1)});
      }
      const auto& c = cand[rng() % cand.size()];
      std::vector<float> x(1024 + static_cast<std::size_t>(it));
      for (auto& v : x) {
        const float q =
            std::floor(std::uniform_real_distribution<float>(c.lo, c.hi)(rng) / c.scale);
        float y = (q + 0.5f) * c.scale;
        for (int j = static_cast<int>(rng() % 9) - 4; j != 0; j += j > 0 ? -1 : 1)
          y = std::nextafter(y, j > 0 ? 1e30f : -1e30f);
        v = std::min(std::max(y, c.lo), c.hi);
      }
      std::vector<double> a(cand.size()), b(cand.size());
      ref.candidate_mse(x.data(), x.size(), cand.data(), cand.size(), a.data());
      k.candidate_mse(x.data(), x.size(), cand.data(), cand.size(), b.data());
      for (std::size_t j = 0; j < cand.size(); ++j)
        REQUIRE(same_bits(a[j], b[j]));
    }
  }
}

TEST_CASE("fused candidate MSE equals the reference when only some chunks need the clip",
          "[kernels]") {
  // The SIMD pass clips only the 256-element chunks that reach beyond a candidate's clip range,
  // and records the ranges of the first 64 chunks (later ones go by the range of the rest).
  // Outliers in a few chunks, on either side and past chunk 64, must not change a bit.
  const kernel_set ref = ptq::kernels::reference_kernel_set();
  std::mt19937 rng(77);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<ptq::kernels::mse_candidate> cand;
  for (int c : {8, 0, 7, 1, 6, 2, 5, 3, 4}) {  // pairs where either one needs the clip
    const float hi = 2.0f + 0.25f * static_cast<float>(c);
    cand.push_back({-3.0f, hi, (hi + 3.0f) / 255.0f});
  }
  cand.push_back({-2.5f, 4.0f, 6.5f / 65535.0f});  // 16 bits: the exact quotient everywhere
  for (const std::size_t n : {std::size_t{4096}, std::size_t{70 * 256 + 37}}) {
    std::vector<float> x(n + 3);
    for (auto& v : x)
      v = std::max(-2.0f, std::min(2.0f, nd(rng)));
    for (const std::size_t chunk : {std::size_t{3}, std::size_t{4}, std::size_t{10},
                                    std::size_t{15}, std::size_t{66}, std::size_t{68}})
      if (chunk * 256 + 300 < n)
        x[chunk * 256 + 7 + chunk % 5] = chunk % 2 == 0 ? 3.7f : -3.6f;
    x[n - 5] = 4.2f;  // in the partial last chunk of the longer case
    for (const auto& k : ptq_test::available_kernel_sets()) {
      INFO("arch " << k.arch_name << ", n " << n);
      for (std::size_t off : {std::size_t{0}, std::size_t{3}}) {
        std::vector<double> a(cand.size()), b(cand.size());
        ref.candidate_mse(x.data() + off, n, cand.data(), cand.size(), a.data());
        k.candidate_mse(x.data() + off, n, cand.data(), cand.size(), b.data());
        for (std::size_t c = 0; c < cand.size(); ++c)
          REQUIRE(same_bits(a[c], b[c]));
      }
    }
  }
}

TEST_CASE("the MSE check threshold rejects every element the cheap quotient rounds wrong",
          "[kernels]") {
  // mse_check_threshold's proof, checked directly: where nearbyint(x·RN(1/s)) differs from the
  // reference's nearbyint(x / s), the cheap float32 term must reach the threshold, so the chunk
  // is redone. Elements a few ulp from half-integer quotients, over scales and ranges up to the
  // largest |q| the checked mode accepts.
  std::mt19937 rng(2024);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-40, 40);
  long wrong = 0, checked = 0;
  for (int it = 0; it < 4000; ++it) {
    const float s = std::ldexp(mantissa(rng), exponent(rng));
    const float qmax = static_cast<float>(1 + rng() % 2040);
    const float absmax = qmax * s;
    const float bound = ptq::kernels::detail::mse_check_threshold(s, absmax);
    REQUIRE(bound > 0.0f);
    const float r = 1.0f / s;
    for (int e = 0; e < 64; ++e) {
      const float k = std::floor(std::uniform_real_distribution<float>(-qmax, qmax - 1.0f)(rng));
      float x = (k + 0.5f) * s;
      for (int j = static_cast<int>(rng() % 65) - 32; j != 0; j += j > 0 ? -1 : 1)
        x = std::nextafter(x, j > 0 ? HUGE_VALF : -HUGE_VALF);
      if (!(std::fabs(x) <= absmax))
        continue;
      ++checked;
      const float cheap = std::nearbyint(x * r);
      if (cheap == std::nearbyint(x / s))
        continue;
      ++wrong;
      const float d = cheap * s - x;
      REQUIRE(d * d >= bound);
    }
  }
  INFO(wrong << " of " << checked << " elements rounded wrong by the cheap quotient");
  CHECK(wrong > 100);  // the test reaches the case it is about
}

TEST_CASE("fake-quant and quantize equal the reference", "[kernels]") {
  const kernel_set ref = ptq::kernels::reference_kernel_set();
  std::mt19937 rng(5);
  const ptq::kernels::quantizer qs[] = {{0.05f, 0.0f, -128.0f, 127.0f},
                                        {0.1f, -3.0f, -128.0f, 127.0f},
                                        {2.0f / 255.0f, -1.0f, -128.0f, 127.0f},
                                        {0.001f, 12.0f, -32768.0f, 32767.0f},
                                        {0.5f, 0.0f, -8.0f, 7.0f}};
  for (const auto& k : ptq_test::available_kernel_sets()) {
    INFO("arch " << k.arch_name);
    // Every length to 1000, and lengths of several 512-value blocks, where the SIMD kernels
    // count one block while they bin the next.
    std::vector<std::size_t> lengths(1001);
    std::iota(lengths.begin(), lengths.end(), std::size_t{0});
    lengths.insert(lengths.end(), {1024, 1541, 4099});
    for (std::size_t n : lengths) {
      const auto data = mixed_data(n + 3, rng);
      for (std::size_t off : offsets) {
        const float* x = data.data() + off;
        for (const auto& q : qs) {
          std::vector<float> fa(n + 1, 9.0f), fb(n + 1, 9.0f);
          ref.fake_quant(x, n, q, fa.data());
          k.fake_quant(x, n, q, fb.data());
          REQUIRE(std::memcmp(fa.data(), fb.data(), (n + 1) * sizeof(float)) == 0);
          if (q.qmax <= 127.0f) {  // an int8 output of a wider grid would not fit int8
            std::vector<std::int8_t> ia(n + 1, 5), ib(n + 1, 5);
            ref.quantize_i8(x, n, q, ia.data());
            k.quantize_i8(x, n, q, ib.data());
            REQUIRE(ia == ib);
          }
          std::vector<std::int16_t> sa(n + 1, 5), sb(n + 1, 5);
          ref.quantize_i16(x, n, q, sa.data());
          k.quantize_i16(x, n, q, sb.data());
          REQUIRE(sa == sb);
        }
      }
    }
    // in place
    auto d = mixed_data(77, rng);
    auto e = d;
    k.fake_quant(d.data(), d.size(), qs[1], d.data());
    ref.fake_quant(e.data(), e.size(), qs[1], e.data());
    CHECK(d == e);
  }
}

TEST_CASE("one-pass top-k equals nth_element", "[kernels]") {
  const kernel_set ref = ptq::kernels::reference_kernel_set();
  std::mt19937 rng(11);
  for (const auto& k : ptq_test::available_kernel_sets()) {
    INFO("arch " << k.arch_name);
    for (std::size_t n = 1; n <= 1000; ++n) {
      const auto data = mixed_data(n + 3, rng);
      for (std::size_t off : offsets) {
        const float* x = data.data() + off;
        for (std::size_t kk : {std::size_t{1}, std::size_t{2}, std::size_t{17}, n / 2 + 1, n}) {
          if (kk < 1 || kk > n)
            continue;
          const std::size_t k2 = kk == n ? 1 : kk;
          const auto a = ref.select_extremes(x, n, kk, k2);
          const auto b = k.select_extremes(x, n, kk, k2);
          REQUIRE(same_bits(a.kth_largest, b.kth_largest));
          REQUIRE(same_bits(a.kth_smallest, b.kth_smallest));
        }
      }
    }
    // sorted input (the heaps' worst case) and many duplicates
    std::vector<float> up(5000);
    for (std::size_t i = 0; i < up.size(); ++i)
      up[i] = static_cast<float>(i);
    const auto s = k.select_extremes(up.data(), up.size(), 17, 5);
    CHECK(s.kth_largest == 4983.0f);
    CHECK(s.kth_smallest == 4.0f);
    std::vector<float> dup(3000, 1.0f);
    dup[10] = 2.0f;
    const auto t = k.select_extremes(dup.data(), dup.size(), 2, 1);
    CHECK(t.kth_largest == 1.0f);
    CHECK(t.kth_smallest == 1.0f);
  }
}

TEST_CASE("HFMG candidate loss equals the reference", "[kernels]") {
  const kernel_set ref = ptq::kernels::reference_kernel_set();
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> rho_d(0.0f, 5000.0f);
  for (const auto& k : ptq_test::available_kernel_sets()) {
    INFO("arch " << k.arch_name);
    for (std::size_t n = 0; n <= 1000; ++n) {
      // increasing distinct bin indices in [0, 4096), like the nonzero bins of a histogram
      std::vector<std::int32_t> idx(n + 3);
      std::vector<float> rho(n + 3);
      std::int32_t next = std::uniform_int_distribution<std::int32_t>(0, 40)(rng);
      for (std::size_t t = 0; t < n + 3; ++t) {
        idx[t] = next;
        next += std::uniform_int_distribution<std::int32_t>(1, 3)(rng);
        rho[t] = rho_d(rng);
      }
      for (std::size_t off : offsets) {
        for (int bits : {8, 16}) {
          const auto left =
              static_cast<std::int32_t>(std::uniform_int_distribution<int>(0, 1500)(rng));
          const auto right =
              static_cast<std::int32_t>(std::uniform_int_distribution<int>(left + 1024, 4095)(rng));
          const float w = std::uniform_real_distribution<float>(1e-4f, 0.5f)(rng);
          const auto p = ptq::kernels::make_hfmg_loss_params(left, right, w, bits);
          const double a = ref.hfmg_loss(idx.data() + off, rho.data() + off, n, p);
          const double b = k.hfmg_loss(idx.data() + off, rho.data() + off, n, p);
          REQUIRE(same_bits(a, b));
          // huge bins: mid·rho overflows float32 while the other terms stay finite, so the
          // reference's t2 = 0·inf is NaN (the SIMD shortcut that skips t2 must not apply)
          const auto huge = ptq::kernels::make_hfmg_loss_params(0, 4095, 8e10f, bits);
          REQUIRE(same_bits(ref.hfmg_loss(idx.data() + off, rho.data() + off, n, huge),
                            k.hfmg_loss(idx.data() + off, rho.data() + off, n, huge)));
        }
      }
    }
  }
}
