// AdaRound's element-wise kernels (kernels/ada_update.hpp) bit for bit against their scalar
// references on every arch the machine runs, over sizes 0..1000 and odd alignments, and the
// exp / log they share (kernels/fast_math.hpp) against libm.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "arch_kernels.hpp"
#include "ptq/kernels/ada_update.hpp"

namespace {

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// Units in the last place between a float result and a double reference.
double ulps(float got, double want) {
  const float w = static_cast<float>(want);
  const double ulp = std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

// One state of n weights (with `pad` floats before each array, for odd alignments).
struct state {
  std::vector<float> base, scale, alpha, m, v, sig, gw, w;
  std::size_t pad;
  state(std::size_t n, std::size_t pad_, std::uint32_t seed) : pad(pad_) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> a(-9.0f, 9.0f), s(1e-4f, 0.05f), g(-2.0f, 2.0f),
        mom(0.0f, 0.01f);
    std::uniform_int_distribution<int> b(-131, 130);
    for (auto* vec : {&base, &scale, &alpha, &m, &v, &sig, &gw, &w})
      vec->assign(n + pad, 0.0f);
    for (std::size_t i = pad; i < n + pad; ++i) {
      base[i] = static_cast<float>(b(gen));
      scale[i] = s(gen);
      alpha[i] = i % 7 == 0 ? 0.0f : a(gen);  // α = 0 gives h = 0.5 exactly: |2h − 1| = 0
      m[i] = g(gen) * 0.01f;
      v[i] = mom(gen);
      gw[i] = i % 11 == 0 ? 0.0f : g(gen);
    }
  }
  ptq::kernels::ada_arrays arrays() {
    return {base.data() + pad, scale.data() + pad, alpha.data() + pad,
            m.data() + pad,    v.data() + pad,     sig.data() + pad};
  }
};

void require_same(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!same_bits(a[i], b[i])) {
      INFO(what << "[" << i << "]: " << a[i] << " vs " << b[i]);
      REQUIRE(same_bits(a[i], b[i]));
    }
  }
}

}  // namespace

TEST_CASE("exp_approx and log_approx are within a few ulp of libm", "[ada][kernels]") {
  double worst_exp = 0.0, worst_log = 0.0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
    worst_exp = std::max(worst_exp, ulps(ptq::kernels::exp_approx(x), std::exp(double{x})));
  }
  for (float x = 6e-8f; x <= 1.0f; x *= 1.0173f) {
    const double want = std::log(double{x});
    // Near x = 1 the result tends to 0: measure in ulps of 1e-7 there.
    const float got = ptq::kernels::log_approx(x);
    worst_log = std::max(worst_log, std::fabs(want) < 1e-3
                                        ? std::fabs(static_cast<double>(got) - want) / 1e-10
                                        : ulps(got, want));
  }
  CHECK(ptq::kernels::log_approx(1.0f) == 0.0f);
  CHECK(ptq::kernels::exp_approx(0.0f) == 1.0f);
  INFO("exp " << worst_exp << " ulp, log " << worst_log << " ulp");
  CHECK(worst_exp <= 3.0);
  CHECK(worst_log <= 3.0);
  // Clamped outside [-87, 88]: finite, no overflow to inf.
  CHECK(std::isfinite(ptq::kernels::exp_approx(1000.0f)));
  CHECK(ptq::kernels::exp_approx(-1000.0f) > 0.0f);
}

TEST_CASE("AdaRound kernels equal their scalar references bit for bit", "[ada][kernels]") {
  const auto sets = ptq_layers_test::available_kernels();
  ptq::kernels::ada_step_params p;
  p.reg_param = 0.01f;
  p.step_size = 1e-2f;
  p.sqrt_bias2 = 0.0316227f;
  for (const auto& ks : sets) {
    INFO(ks.set.arch_name);
    for (std::size_t n = 0; n <= 1000; n += (n < 40 ? 1 : 37)) {
      for (std::size_t pad : {std::size_t{0}, std::size_t{1}, std::size_t{3}}) {
        for (float beta : {0.0f, 2.0f, 13.7f}) {
          INFO("n " << n << " pad " << pad << " beta " << beta);
          p.beta = beta;
          state ref(n, pad, static_cast<std::uint32_t>(n * 7 + pad));
          state simd = ref;
          auto ra = ref.arrays();
          auto sa = simd.arrays();
          ptq::kernels::ada_soft_weight_ref(ra, n, ref.w.data() + pad);
          ks.set.ada_soft_weight(sa, n, simd.w.data() + pad);
          require_same(ref.w, simd.w, "w");
          require_same(ref.sig, simd.sig, "sig");
          const double r1 = ptq::kernels::ada_step_ref(ra, n, ref.gw.data() + pad, p);
          const double r2 = ks.set.ada_step(sa, n, simd.gw.data() + pad, p);
          CHECK(std::memcmp(&r1, &r2, sizeof r1) == 0);
          require_same(ref.alpha, simd.alpha, "alpha");
          require_same(ref.m, simd.m, "m");
          require_same(ref.v, simd.v, "v");
          if (beta == 0.0f)
            CHECK(r1 == 0.0);
        }
      }
    }
  }
}

TEST_CASE("the soft weight is on or between the two grid points", "[ada][kernels]") {
  state s(500, 0, 3);
  auto a = s.arrays();
  ptq::kernels::ada_soft_weight_ref(a, 500, s.w.data());
  for (std::size_t i = 0; i < 500; ++i) {
    const float lo = std::fmin(std::fmax(s.base[i], -128.0f), 127.0f) * s.scale[i];
    const float hi = std::fmin(std::fmax(s.base[i] + 1.0f, -128.0f), 127.0f) * s.scale[i];
    CHECK(s.w[i] >= lo);
    CHECK(s.w[i] <= hi);
    CHECK(s.sig[i] == Approx(1.0 / (1.0 + std::exp(-double{s.alpha[i]}))).epsilon(1e-6));
  }
}
