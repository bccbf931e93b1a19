// The KL-divergence initial AdaRound scale (docs/ada.md, Initial scale): hand-derived cases, an
// independent plain-loop search (the toolkit's steps written out directly, sequential sums), ties,
// per-channel vs per-tensor, the ConvTranspose2d channel mapping with groups, and errors.
#include <catch2/catch.hpp>

#include <array>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../support/rearrange.hpp"
#include "ptq/algorithms/weights/ada_kl.hpp"

namespace {

// ---- independent reference: the toolkit's steps as plain loops, written apart from the library.

std::vector<double> ref_histogram(const std::vector<float>& x, float t) {
  std::vector<double> h(512, 0.0);
  const float lo = -t;
  const float span = t - lo;
  for (float v : x) {
    // torch.histc on CPU: ((x - lo) * bins) / (hi - lo) in float32, the top edge in the last bin.
    const float f = ((v - lo) * 512.0f) / span;
    long b = static_cast<long>(f);
    if (b > 511)
      b = 511;
    h[static_cast<std::size_t>(b)] += 1.0;
  }
  return h;
}

void ref_smooth(std::vector<double>& d) {
  double zeros = 0.0;
  for (double v : d)
    zeros += v == 0.0 ? 1.0 : 0.0;
  const double nonzeros = static_cast<double>(d.size()) - zeros;
  const double inc = 0.0001 * zeros / nonzeros;
  if (inc >= 1.0)
    return;
  for (double& v : d)
    v = v == 0.0 ? 0.0001 : v + inc;
}

double ref_divergence(const std::vector<double>& h, int i) {
  const int len = 512 - 2 * i;
  std::vector<double> p(h.begin() + i, h.begin() + 512 - i);
  for (int b = 0; b < i; ++b) {
    p.front() += h[static_cast<std::size_t>(b)];
    p.back() += h[static_cast<std::size_t>(511 - b)];
  }
  std::vector<double> q(p.size(), 0.0);
  const double merge = len / 255.0;  // as the toolkit: ceil of a double product
  for (int j = 0; j < 255; ++j) {
    const int s = static_cast<int>(std::ceil(j * merge));
    const int e = j == 254 ? len : static_cast<int>(std::ceil((j + 1) * merge));
    double sum = 0.0;
    int norm = 0;
    for (int k = s; k < e; ++k) {
      sum += p[static_cast<std::size_t>(k)];
      norm += p[static_cast<std::size_t>(k)] != 0.0;
    }
    for (int k = s; k < e && norm > 0; ++k) {
      if (p[static_cast<std::size_t>(k)] != 0.0)
        q[static_cast<std::size_t>(k)] = sum / norm;
    }
  }
  ref_smooth(p);
  ref_smooth(q);
  double sp = 0.0, sq = 0.0;
  for (std::size_t k = 0; k < p.size(); ++k) {
    sp += p[k];
    sq += q[k];
  }
  double kl = 0.0;
  for (std::size_t k = 0; k < p.size(); ++k)
    kl += (p[k] / sp) * std::log((p[k] / sp) / (q[k] / sq));
  return kl;
}

struct ref_result {
  int window = 0;
  float scale = 1.0f;
};

ref_result ref_search(const std::vector<float>& x) {
  float t = 0.0f;
  for (float v : x)
    t = std::fabs(v) > t ? std::fabs(v) : t;
  ref_result r;
  if (t == 0.0f)
    return r;
  const std::vector<double> h = ref_histogram(x, t);
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 20; ++i) {
    const double kl = ref_divergence(h, i);
    if (kl < best) {
      best = kl;
      r.window = i;
    }
  }
  const float width = (t - (-t)) / 512.0f;  // float32 tensors, as the toolkit
  const float threshold = -t + static_cast<float>(r.window) * width;  // hist_min + i·width
  r.scale = threshold / -128.0f;
  if (r.scale < FLT_EPSILON)
    r.scale = 1.0f;
  return r;
}

ptq::detail::kl_histogram to_counts(const std::vector<double>& h) {
  ptq::detail::kl_histogram c{};
  for (std::size_t b = 0; b < 512; ++b)
    c[b] = static_cast<std::int64_t>(h[b]);
  return c;
}

/// The centre of bin b of [-t, t] (exact in float for t = 1).
float bin_centre(std::size_t b, float t = 1.0f) {
  return -t + (static_cast<float>(b) + 0.5f) * (2.0f * t / 512.0f);
}

const std::vector<ptq::kernels::kernel_set>& kernel_sets() {
  static const std::vector<ptq::kernels::kernel_set> sets = {ptq::kernels::reference_kernel_set(),
                                                             ptq::kernels::default_kernels()};
  return sets;
}

}  // namespace

TEST_CASE("kl: numpy pairwise summation order", "[ada][kl]") {
  using ptq::detail::numpy_pairwise_sum;
  // Below 8 elements: a plain left-to-right sum.
  const double a[3] = {1e16, 1.0, 1.0};
  CHECK(numpy_pairwise_sum(a, 3) == (1e16 + 1.0) + 1.0);
  // 8..128: eight accumulators r_j = a_j + a_{j+8} + ..., combined as a tree, then the tail.
  // Here r_0 = 1e16 - 1e16 = 0 keeps both ones; a sequential sum loses them next to 1e16.
  std::vector<double> b(17, 0.0);
  b[0] = 1e16;
  b[8] = -1e16;
  b[1] = 1.0;
  b[2] = 1.0;
  b[16] = 1.0;  // the tail, added last
  CHECK(numpy_pairwise_sum(b.data(), 16) == 2.0);
  CHECK(numpy_pairwise_sum(b.data(), 17) == 3.0);
  double seq16 = 0.0;
  for (std::size_t i = 0; i < 16; ++i)
    seq16 += b[i];
  CHECK(seq16 == 0.0);
  // Above 128: halves split at a multiple of 8 (200 -> 96 + 104).
  std::vector<double> d(200, 0.0);
  d[0] = 1e16;
  d[95] = 1.0;  // first half: lost next to 1e16
  d[96] = -1e16;
  d[199] = 1.0;  // second half: lost next to -1e16
  CHECK(numpy_pairwise_sum(d.data(), 200) == 0.0);
  double seq = 0.0;
  for (double v : d)
    seq += v;
  CHECK(seq == 1.0);  // a sequential sum keeps the last 1: the order is observable
}

TEST_CASE("kl: smoothing", "[ada][kl]") {
  std::vector<double> h = {0.0, 2.0, 0.0, 0.0};
  REQUIRE(ptq::detail::kl_smooth(h.data(), h.size()));
  const double inc = 1e-4 * 3.0 / 1.0;
  CHECK(h == std::vector<double>{1e-4, 2.0 + inc, 1e-4, 1e-4});
  // An increment >= 1 skips the smoothing: 10001 zeros for one nonzero.
  std::vector<double> sparse(10002, 0.0);
  sparse[5] = 7.0;
  REQUIRE(ptq::detail::kl_smooth(sparse.data(), sparse.size()));
  CHECK(sparse[5] == 7.0);
  CHECK(sparse[0] == 0.0);
  // 9999 zeros: increment 0.9999 < 1, applied.
  std::vector<double> dense(10000, 0.0);
  dense[0] = 7.0;
  REQUIRE(ptq::detail::kl_smooth(dense.data(), dense.size()));
  CHECK(dense[0] == 7.0 + 1e-4 * 9999.0 / 1.0);
  CHECK(dense[1] == 1e-4);
  std::vector<double> zero(4, 0.0);
  CHECK_FALSE(ptq::detail::kl_smooth(zero.data(), zero.size()));
}

TEST_CASE("kl: window scale in float32", "[ada][kl]") {
  // T = 1: width 1/256, every step exact: (1 - i/256) / 128.
  for (std::size_t i = 0; i < 20; ++i) {
    CHECK(ptq::detail::kl_window_scale(1.0f, i) ==
          static_cast<float>((1.0 - static_cast<double>(i) / 256.0) / 128.0));
  }
  // T = 1 + 2^-23: 3·width needs 25 bits, so the float32 product rounds before the subtraction.
  const float t = 1.0f + FLT_EPSILON;
  const float width = (t + t) / 512.0f;
  const float step = 3.0f * width;
  CHECK(static_cast<double>(step) != 3.0 * static_cast<double>(width));
  CHECK(ptq::detail::kl_window_scale(t, 3) == (t - step) / 128.0f);
}

TEST_CASE("kl: all-zero weight gives scale 1", "[ada][kl]") {
  const std::vector<float> w(37, 0.0f);
  auto r = ptq::detail::kl_init_scale(w.data(), w.size());
  REQUIRE(r);
  CHECK(r.value().scale == 1.0f);
  CHECK(r.value().absmax == 0.0f);
  CHECK(r.value().window == 0);
  const std::vector<float> nz = {0.0f, -0.0f};
  CHECK(ptq::detail::kl_init_scale(nz.data(), nz.size()).value().scale == 1.0f);
}

TEST_CASE("kl: one value per bin (uniform) keeps the full range", "[ada][kl]") {
  // One value at the centre of each of the 512 bins of [-1, 1], plus -1 and 1 (so T = 1): the
  // histogram is flat (2 at the ends). Clipping folds mass into the end bins, which the 255-group
  // merge then smears over its group: every narrower window diverges more.
  std::vector<float> w;
  for (std::size_t b = 0; b < 512; ++b)
    w.push_back(bin_centre(b));
  w.push_back(-1.0f);
  w.push_back(1.0f);
  for (const auto& k : kernel_sets()) {
    auto r = ptq::detail::kl_init_scale(w.data(), w.size(), "w", k);
    REQUIRE(r);
    CHECK(r.value().absmax == 1.0f);
    CHECK(r.value().window == 0);
    CHECK(r.value().scale == 1.0f / 128.0f);
  }
  const ref_result ref = ref_search(w);
  CHECK(ref.window == 0);
  // Scaled by a power of two the bins are the same and the scale scales exactly.
  for (auto& v : w)
    v *= 0.25f;
  CHECK(ptq::detail::kl_init_scale(w.data(), w.size()).value().scale == 0.25f / 128.0f);
}

TEST_CASE("kl: equal bin pairs make window 1 lossless", "[ada][kl]") {
  // Bins 1..510 hold pairs (1+2j, 2+2j) with equal counts c_j (varying with j), bin 0 is empty
  // and bin 511 holds the single maximum T = 1. Window 1 has length 510 = 2·255, so its groups
  // are exactly those pairs: Q = P except at the last bin (c_254 + 1 vs c_254), KL tiny. Every
  // other window has groups of 1.86..2.01 bins that straddle the pairs.
  std::vector<float> w;
  for (std::size_t j = 0; j < 255; ++j) {
    const std::size_t c = 10 + (j * 37) % 11;
    for (std::size_t r = 0; r < c; ++r) {
      w.push_back(bin_centre(1 + 2 * j));
      w.push_back(bin_centre(2 + 2 * j));
    }
  }
  w.push_back(1.0f);
  for (const auto& k : kernel_sets()) {
    auto r = ptq::detail::kl_init_scale(w.data(), w.size(), "w", k);
    REQUIRE(r);
    CHECK(r.value().window == 1);
    CHECK(r.value().scale == 255.0f / 32768.0f);  // (1 - 1/256) / 128
  }
  CHECK(ref_search(w).window == 1);
  const std::vector<double> h = ref_histogram(w, 1.0f);
  const ptq::detail::kl_histogram counts = to_counts(h);
  // Drop the maximum: window 1 is then exactly lossless (KL 0, not just the smallest).
  ptq::detail::kl_histogram no_max = counts;
  no_max[511] = 0;
  CHECK(ptq::detail::kl_window_divergence(no_max, 1) == 0.0);
  for (std::size_t i = 0; i < 20; ++i) {
    const double kl = ptq::detail::kl_window_divergence(counts, i);
    CHECK(kl == Approx(ref_divergence(h, static_cast<int>(i))).epsilon(1e-12));
    if (i != 1)
      CHECK(kl > ptq::detail::kl_window_divergence(counts, 1));
  }
}

TEST_CASE("kl: ties keep the first window", "[ada][kl]") {
  // A constant tensor puts all its mass in bin 511: for every window P has one nonzero entry and
  // Q equals P, so all 20 divergences are exactly 0 and the first window wins (a `<=` search
  // would pick the last).
  const std::vector<float> w(100, 0.75f);
  ptq::detail::kl_histogram h{};
  h[511] = 100;
  for (std::size_t i = 0; i < 20; ++i)
    CHECK(ptq::detail::kl_window_divergence(h, i) == 0.0);
  CHECK(ptq::detail::kl_best_window(h) == 0);
  auto r = ptq::detail::kl_init_scale(w.data(), w.size());
  REQUIRE(r);
  CHECK(r.value().window == 0);
  CHECK(r.value().scale == 0.75f / 128.0f);
  // Mass split between both ends ties as well (each end group holds one nonzero bin).
  ptq::detail::kl_histogram ends{};
  ends[0] = 3;
  ends[511] = 5;
  for (std::size_t i = 0; i < 20; ++i)
    CHECK(ptq::detail::kl_window_divergence(ends, i) == 0.0);
  CHECK(ptq::detail::kl_best_window(ends) == 0);
  // An all-zero histogram has no distribution: +Inf, and the search stays at window 0.
  const ptq::detail::kl_histogram empty{};
  CHECK(ptq::detail::kl_window_divergence(empty, 0) == std::numeric_limits<double>::infinity());
  CHECK(ptq::detail::kl_best_window(empty) == 0);
}

TEST_CASE("kl: random weights with outliers match the plain-loop search", "[ada][kl]") {
  // Normal bulk plus a few large outliers: the chosen window depends on how the 255 groups align
  // with the bulk, so the expected index comes from the independent search.
  int narrower = 0;
  for (unsigned seed = 0; seed < 40; ++seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> w(3000 + 97 * seed);
    for (auto& x : w)
      x = nd(rng);
    const float out = seed % 2 ? 20.0f : 5.0f;
    w[3] = out;
    w[w.size() / 2] = -0.9f * out;
    const ref_result ref = ref_search(w);
    narrower += ref.window > 0 ? 1 : 0;
    for (const auto& k : kernel_sets()) {
      auto r = ptq::detail::kl_init_scale(w.data(), w.size(), "w", k);
      REQUIRE(r);
      INFO("seed " << seed << " kernels " << k.arch_name);
      CHECK(static_cast<int>(r.value().window) == ref.window);
      CHECK(r.value().scale == ref.scale);
    }
  }
  CHECK(narrower > 10);  // the cases do exercise clipped windows
}

TEST_CASE("kl: per tensor vs per output channel", "[ada][kl]") {
  // Conv2d [4, 2, 3, 3]: channel o is row o; each row has its own range.
  const std::vector<std::size_t> shape{4, 2, 3, 3};
  std::vector<float> w(4 * 18);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
  for (std::size_t o = 0; o < 4; ++o) {
    for (std::size_t e = 0; e < 18; ++e)
      w[o * 18 + e] = ud(rng) * static_cast<float>(o + 1);
  }
  std::fill(w.begin() + 2 * 18, w.begin() + 3 * 18, 0.0f);  // an all-zero channel
  const ptq::tensor_view t = ptq::view_of(w.data(), shape, "conv.weight");
  auto pc = ptq::ada_kl_calibrate(t, ptq::layer_type::conv2d, 1, true);
  REQUIRE(pc);
  REQUIRE(pc.value().scale.size() == 4);
  CHECK(pc.value().offset == std::vector<std::int32_t>(4, 0));
  CHECK(pc.value().bits == 8);
  for (std::size_t o = 0; o < 4; ++o) {
    const std::vector<float> row(w.begin() + static_cast<std::ptrdiff_t>(o * 18),
                                 w.begin() + static_cast<std::ptrdiff_t>((o + 1) * 18));
    CHECK(pc.value().scale[o] == ptq::detail::kl_init_scale(row.data(), row.size()).value().scale);
    CHECK(pc.value().scale[o] == ref_search(row).scale);
  }
  CHECK(pc.value().scale[2] == 1.0f);
  auto pt = ptq::ada_kl_calibrate(t, ptq::layer_type::conv2d, 1, false);
  REQUIRE(pt);
  REQUIRE(pt.value().scale.size() == 1);
  CHECK(pt.value().offset == std::vector<std::int32_t>{0});
  CHECK(pt.value().scale[0] == ref_search(w).scale);
  CHECK(pt.value().scale[0] != pc.value().scale[0]);
  // Linear [Cout, Cin] per tensor.
  const ptq::tensor_view lin = ptq::view_of(w.data(), {8, 9}, "fc.weight");
  CHECK(ptq::ada_kl_calibrate(lin, ptq::layer_type::linear, 1, false).value().scale ==
        pt.value().scale);
}

TEST_CASE("kl: ConvTranspose2d with groups maps output channels", "[ada][kl]") {
  // [Cin = 4, Cout/g = 3, 2, 2] with g = 2: Cout = 6 and output channel o = gi·3 + j collects
  // W[gi·2 + ci, j, :, :] for ci in {0, 1} (docs/numerics.md, ARQ).
  const std::size_t cin = 4, cpg = 3, g = 2, k = 4;
  std::vector<float> w(cin * cpg * k);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
  for (std::size_t ci = 0; ci < cin; ++ci) {
    for (std::size_t j = 0; j < cpg; ++j) {
      const std::size_t o = (ci / (cin / g)) * cpg + j;
      for (std::size_t e = 0; e < k; ++e)
        w[(ci * cpg + j) * k + e] = ud(rng) * static_cast<float>(1 + o);  // distinct ranges
    }
  }
  const ptq::tensor_view t = ptq::view_of(w.data(), {cin, cpg, 2, 2}, "deconv.weight");
  auto r = ptq::ada_kl_calibrate(t, ptq::layer_type::conv_transpose2d, g, true);
  REQUIRE(r);
  REQUIRE(r.value().scale.size() == 6);
  const xt::xarray<float> rows = ptq_test::rearrange_conv_transpose(t, g);  // [Cout, Cin/g, 2, 2]
  for (std::size_t o = 0; o < 6; ++o) {
    std::vector<float> mine;
    const std::size_t gi = o / cpg, j = o % cpg;
    for (std::size_t ci = 0; ci < cin / g; ++ci) {
      for (std::size_t e = 0; e < k; ++e)
        mine.push_back(w[((gi * (cin / g) + ci) * cpg + j) * k + e]);
    }
    const std::vector<float> row(rows.data() + o * 8, rows.data() + (o + 1) * 8);
    CHECK(row == mine);
    CHECK(r.value().scale[o] == ref_search(mine).scale);
    for (std::size_t q = 0; q < o; ++q)
      CHECK(r.value().scale[q] != r.value().scale[o]);  // a wrong mapping would show
  }
}

TEST_CASE("kl: errors", "[ada][kl]") {
  std::vector<float> w(2 * 3 * 2 * 2, 0.5f);
  w[17] = std::numeric_limits<float>::quiet_NaN();
  const ptq::tensor_view t = ptq::view_of(w.data(), {2, 3, 2, 2}, "conv1.weight");
  for (bool cw : {true, false}) {
    auto r = ptq::ada_kl_calibrate(t, ptq::layer_type::conv2d, 1, cw);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ptq::errc::non_finite);
    CHECK(r.error().message == "conv1.weight: NaN at flat index 17");
  }
  w[17] = -std::numeric_limits<float>::infinity();
  auto inf = ptq::detail::kl_init_scale(w.data(), w.size(), "x");
  REQUIRE_FALSE(inf);
  CHECK(inf.error().message == "x: -Inf at flat index 17");

  auto empty = ptq::detail::kl_init_scale(w.data(), 0, "x");
  REQUIRE_FALSE(empty);
  CHECK(empty.error().code == ptq::errc::empty_tensor);
  const ptq::tensor_view none = ptq::view_of(w.data(), {0, 3, 2, 2}, "conv2.weight");
  auto e2 = ptq::ada_kl_calibrate(none, ptq::layer_type::conv2d, 1, true);
  REQUIRE_FALSE(e2);
  CHECK(e2.error().code == ptq::errc::empty_tensor);

  const ptq::tensor_view bad_rank = ptq::view_of(w.data(), {24}, "conv3.weight");
  CHECK(ptq::ada_kl_calibrate(bad_rank, ptq::layer_type::conv2d, 1, true).error().code ==
        ptq::errc::shape_mismatch);

  // A range whose histogram arithmetic would overflow float32 names the tensor and channel.
  std::vector<float> big(2 * 4, 1.0f);
  big[5] = 1e36f;
  const ptq::tensor_view tb = ptq::view_of(big.data(), {2, 4}, "fc.weight");
  auto huge = ptq::ada_kl_calibrate(tb, ptq::layer_type::linear, 1, true);
  REQUIRE_FALSE(huge);
  CHECK(huge.error().code == ptq::errc::out_of_range);
  CHECK(huge.error().message.rfind("fc.weight channel 1: max|w|", 0) == 0);
  big[5] = ptq::detail::kl_max_absmax;
  CHECK(ptq::ada_kl_calibrate(tb, ptq::layer_type::linear, 1, true));
}
