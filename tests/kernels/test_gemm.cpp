// The SIMD GEMM of every arch this machine runs equals the scalar reference (fused or not, as the
// arch) bit for bit: shapes 0..100 in each dimension, both transpositions, accumulate, odd leading
// dimensions and offsets, and shapes that cross every cache block (mc, kc, nc).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "arch_kernels.hpp"
#include "ptq/kernels/gemm.hpp"

namespace {

using ptq::kernels::gemm_problem;

std::vector<float> random_floats(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 19);
  std::vector<float> v(n);
  for (auto& x : v) {
    const int p = pick(rng);
    x = p == 0 ? 0.0f : p == 1 ? -0.0f : nd(rng);  // signed zeros exercise the +0 start
  }
  return v;
}

/// The operands of one problem, with room for an offset and padded leading dimensions. C gets
/// sentinels outside its m x n window so a kernel writing past it is caught.
struct case_data {
  gemm_problem p;
  std::vector<float> a, b, c;
};

case_data make_case(std::size_t m, std::size_t n, std::size_t k, bool ta, bool tb, bool acc,
                    std::mt19937& rng) {
  std::uniform_int_distribution<std::size_t> extra(0, 5), off(0, 3);
  case_data d;
  gemm_problem& p = d.p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.trans_a = ta;
  p.trans_b = tb;
  p.accumulate = acc;
  p.lda = (ta ? m : k) + extra(rng);
  p.ldb = (tb ? k : n) + extra(rng);
  p.ldc = n + extra(rng);
  const std::size_t oa = off(rng), ob = off(rng), oc = off(rng);
  d.a = random_floats(oa + (ta ? k : m) * p.lda + 1, rng);
  d.b = random_floats(ob + (tb ? n : k) * p.ldb + 1, rng);
  d.c = random_floats(oc + m * p.ldc + 1, rng);
  p.a = d.a.data() + oa;
  p.b = d.b.data() + ob;
  p.c = d.c.data() + oc;
  return d;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

/// Runs `fn` and the reference on copies of C; true when every float (sentinels too) is equal.
template <class Fn>
bool matches_reference(const case_data& d, bool fused, Fn&& fn) {
  std::vector<float> c_ref = d.c, c_simd = d.c;
  gemm_problem pr = d.p, ps = d.p;
  pr.c = c_ref.data() + (d.p.c - d.c.data());
  ps.c = c_simd.data() + (d.p.c - d.c.data());
  ptq::kernels::gemm_ref(pr, fused);
  fn(ps);
  return same_bits(c_ref, c_simd);
}

}  // namespace

TEST_CASE("gemm reference: the fused flag changes the rounding", "[gemm]") {
  // Without this, comparing a kernel against the wrong reference could pass unnoticed.
  std::mt19937 rng(7);
  auto d = make_case(20, 20, 50, false, false, false, rng);
  std::vector<float> c1 = d.c, c2 = d.c;
  gemm_problem p1 = d.p, p2 = d.p;
  p1.c = c1.data() + (d.p.c - d.c.data());
  p2.c = c2.data() + (d.p.c - d.c.data());
  ptq::kernels::gemm_ref(p1, true);
  ptq::kernels::gemm_ref(p2, false);
  CHECK_FALSE(same_bits(c1, c2));
}

TEST_CASE("gemm reference computes the documented sum", "[gemm]") {
  // A(i,q) = i + 2q, B(q,j) = q - j: small integers, so every sum is exact.
  const std::size_t m = 3, n = 4, k = 5;
  std::vector<float> a(m * k), at(k * m), b(k * n), bt(n * k);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t q = 0; q < k; ++q) {
      a[i * k + q] = static_cast<float>(i + 2 * q);
      at[q * m + i] = a[i * k + q];
    }
  }
  for (std::size_t q = 0; q < k; ++q) {
    for (std::size_t j = 0; j < n; ++j) {
      b[q * n + j] = static_cast<float>(q) - static_cast<float>(j);
      bt[j * k + q] = b[q * n + j];
    }
  }
  for (int variant = 0; variant < 4; ++variant) {
    const bool ta = (variant & 1) != 0, tb = (variant & 2) != 0;
    std::vector<float> c(m * n, 1.0f);
    gemm_problem p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.a = ta ? at.data() : a.data();
    p.lda = ta ? m : k;
    p.trans_a = ta;
    p.b = tb ? bt.data() : b.data();
    p.ldb = tb ? k : n;
    p.trans_b = tb;
    p.c = c.data();
    p.ldc = n;
    p.accumulate = true;
    ptq::kernels::gemm_ref(p, false);
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        double want = 1.0;
        for (std::size_t q = 0; q < k; ++q) {
          want +=
              static_cast<double>(i + 2 * q) * (static_cast<double>(q) - static_cast<double>(j));
        }
        REQUIRE(c[i * n + j] == static_cast<float>(want));
      }
    }
  }
}

TEST_CASE("gemm: every arch equals the reference bit for bit", "[gemm]") {
  std::mt19937 rng(2024);
  std::uniform_int_distribution<std::size_t> dim(0, 100), flag(0, 1);
  const std::size_t edges[] = {0, 1, 2, 3, 4, 5, 7, 8, 11, 12, 13, 23, 24, 25, 47, 48, 49, 97, 100};
  std::uniform_int_distribution<std::size_t> edge(0, sizeof edges / sizeof edges[0] - 1);
  for (const auto& ak : ptq_layers_test::available_kernels()) {
    INFO("arch " << ak.set.arch_name << " fused " << ak.fused);
    std::vector<float> ws(ptq::kernels::gemm_workspace_floats + 3);
    for (int iter = 0; iter < 400; ++iter) {
      const bool from_edges = iter % 2 == 0;
      const std::size_t m = from_edges ? edges[edge(rng)] : dim(rng);
      const std::size_t n = from_edges ? edges[edge(rng)] : dim(rng);
      const std::size_t k = from_edges ? edges[edge(rng)] : dim(rng);
      const bool ta = flag(rng) != 0, tb = flag(rng) != 0, acc = flag(rng) != 0;
      INFO("m " << m << " n " << n << " k " << k << " ta " << ta << " tb " << tb << " acc " << acc);
      const auto d = make_case(m, n, k, ta, tb, acc, rng);
      // The workspace at an odd float offset (the kernel aligns it) and the thread-local one.
      float* wsp = ws.data() + 1 + static_cast<std::size_t>(iter % 3);
      REQUIRE(matches_reference(d, ak.fused, [&](const gemm_problem& p) { ak.set.gemm(p, wsp); }));
      REQUIRE(
          matches_reference(d, ak.fused, [&](const gemm_problem& p) { ak.set.gemm(p, nullptr); }));
    }
  }
}

TEST_CASE("gemm: shapes across the cache blocks equal the reference", "[gemm]") {
  std::mt19937 rng(77);
  struct shape {
    std::size_t m, n, k;
  };
  // m > gemm_mc, k > gemm_kc (the running sum goes through C between k blocks), n > gemm_nc.
  const shape shapes[] = {{130, 70, 300}, {9, 1000, 260}, {131, 965, 513}, {64, 576, 512}};
  for (const auto& ak : ptq_layers_test::available_kernels()) {
    INFO("arch " << ak.set.arch_name);
    for (const auto& s : shapes) {
      for (int variant = 0; variant < 4; ++variant) {
        const bool ta = (variant & 1) != 0, tb = (variant & 2) != 0;
        INFO("m " << s.m << " n " << s.n << " k " << s.k << " ta " << ta << " tb " << tb);
        const auto d = make_case(s.m, s.n, s.k, ta, tb, variant == 3, rng);
        REQUIRE(matches_reference(d, ak.fused,
                                  [&](const gemm_problem& p) { ak.set.gemm(p, nullptr); }));
      }
    }
  }
}

TEST_CASE("gemm: the kernel sets carry their references", "[gemm]") {
  const auto ref = ptq::kernels::reference_kernel_set();
  CHECK(ref.gemm == &ptq::kernels::gemm_ref_unfused);
  CHECK_FALSE(ptq::kernels::gemm_uses_fma<xsimd::sse2>);
  CHECK(ptq::kernels::gemm_uses_fma<xsimd::fma3<xsimd::avx2>>);
  CHECK(ptq::kernels::gemm_uses_fma<xsimd::avx512f>);
  for (const auto& ak : ptq_layers_test::available_kernels())
    CHECK(ak.set.gemm != nullptr);
}

TEST_CASE("gemm: k = 0 clears C or leaves it", "[gemm]") {
  for (const auto& ak : ptq_layers_test::available_kernels()) {
    std::vector<float> c(12, 5.0f);
    gemm_problem p;
    p.m = 3;
    p.n = 4;
    p.k = 0;
    p.c = c.data();
    p.ldc = 4;
    p.accumulate = true;
    ak.set.gemm(p, nullptr);
    CHECK(c == std::vector<float>(12, 5.0f));
    p.accumulate = false;
    ak.set.gemm(p, nullptr);
    CHECK(c == std::vector<float>(12, 0.0f));
  }
}
