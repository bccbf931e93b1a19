// Plain-loop implementations of IFMR, HFMG and DMQ written straight from their descriptions
// (docs/numerics.md) for the randomized comparisons: sorting instead of top-k, sequential sums
// instead of striped blocks, explicit Cin-first matrices instead of index arithmetic, every bin
// visited.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

namespace plain {

struct ifmr_out {
  float scale = 1.0f;
  int offset = 0;
  std::size_t best = 0;
  std::vector<double> losses;
  std::vector<float> scales;
};

inline ifmr_out ifmr(const std::vector<float>& x, double start, double end, double step,
                     double pmax, double pmin, int bits, bool asym) {
  const std::size_t n = x.size();
  std::vector<float> s = x;
  std::sort(s.begin(), s.end());
  auto rank = [n](double p) -> std::size_t {
    if (1.0 - p < static_cast<double>(FLT_EPSILON))
      return 1;
    return n - static_cast<std::size_t>(p * static_cast<double>(n));
  };
  float mx = s[n - rank(pmax)];
  float mn = s[rank(pmin) - 1];
  mx = std::max(mx, 0.0f);
  mn = std::min(mn, 0.0f);
  // torch.arange(start, end, step, float32): vectorised blocks of 16 in 8-lane halves, scalar tail
  const auto k = static_cast<std::size_t>(std::ceil((end - start) / step));
  std::vector<float> r(k);
  for (std::size_t i = 0; i < k; ++i) {
    if (i < k - k % 16) {
      const std::size_t i0 = i - i % 8;
      const auto base = static_cast<float>(start + step * static_cast<double>(i0));
      r[i] = static_cast<float>(static_cast<double>(base) + static_cast<double>(i - i0) * step);
    } else {
      r[i] = static_cast<float>(start + step * static_cast<double>(i));
    }
  }
  float bound = mx;
  float limit = static_cast<float>(std::pow(2.0, bits) - 1.0);
  if (!asym) {
    const bool neg = std::fabs(mx) < std::fabs(mn);
    bound = std::max(std::fabs(mx), std::fabs(mn));
    limit = static_cast<float>(std::pow(2.0, bits - 1) - 1.0 + (neg ? 1.0 : 0.0));
  }
  ifmr_out out;
  for (std::size_t i = 0; i < k; ++i) {
    const float c = r[i] * bound;
    float sc = asym ? (c - mn) / limit : c / limit;
    if (sc < FLT_EPSILON)
      sc = 1.0f;
    const float lo = asym ? mn : -c;
    double loss = 0.0;
    for (float v : x) {
      const float t = std::min(std::max(v, lo), c);
      const float d = std::nearbyint(t / sc) * sc - v;
      loss += static_cast<double>(d * d);
    }
    out.losses.push_back(loss);
    out.scales.push_back(sc);
    if (loss < out.losses[out.best])
      out.best = i;
  }
  out.scale = out.scales[out.best];
  out.offset = asym ? static_cast<int>(-std::nearbyint(mn / out.scale) -
                                       static_cast<float>(std::pow(2.0, bits - 1)))
                    : 0;
  return out;
}

struct hist {
  float lo = 0, hi = 0;
  std::vector<std::int64_t> c;
};

inline std::vector<std::int64_t> histc(const std::vector<float>& x, float lo, float hi,
                                       std::size_t bins) {
  std::vector<std::int64_t> c(bins, 0);
  float l = lo, h = hi;
  if (l == h) {
    l -= 1.0f;
    h += 1.0f;
  }
  for (float v : x) {
    if (v < l || v > h)
      continue;
    auto b = static_cast<std::int64_t>(((v - l) * static_cast<float>(bins)) / (h - l));
    if (b >= static_cast<std::int64_t>(bins))
      b = static_cast<std::int64_t>(bins) - 1;
    ++c[static_cast<std::size_t>(b)];
  }
  return c;
}

/// Python's float floor division (fmod based), in float32.
inline float pyfloordiv(float a, float b) {
  const float mod = std::fmod(a, b);
  float div = (a - mod) / b;
  if (mod != 0.0f && ((b < 0.0f) != (mod < 0.0f)))
    div -= 1.0f;
  if (div == 0.0f)
    return std::copysign(0.0f, a / b);
  float f = std::floor(div);
  if (div - f > 0.5f)
    f += 1.0f;
  return f;
}

inline hist hfmg_accumulate(const std::vector<std::vector<float>>& batches, std::size_t bins) {
  hist h;
  for (std::size_t k = 0; k < batches.size(); ++k) {
    const auto& x = batches[k];
    const float mn = *std::min_element(x.begin(), x.end());
    const float mx = *std::max_element(x.begin(), x.end());
    if (k == 0) {
      h.lo = mn;
      h.hi = mx;
      h.c = histc(x, mn, mx, bins);
      continue;
    }
    hist m;
    m.lo = std::min(h.lo, mn);
    m.hi = std::max(h.hi, mx);
    m.c = histc(x, m.lo, m.hi, bins);
    const bool same = std::fabs(double(m.lo) - double(h.lo)) <= FLT_EPSILON &&
                      std::fabs(double(m.hi) - double(h.hi)) <= FLT_EPSILON;
    if (same) {
      for (std::size_t b = 0; b < bins; ++b)
        m.c[b] += h.c[b];
    } else {
      const float nb = static_cast<float>(bins);
      const float w = (h.hi - h.lo) / nb, mw = (m.hi - m.lo) / nb;
      for (std::size_t b = 0; b < bins; ++b) {
        const float lower = h.lo + static_cast<float>(b) * w;
        const float upper = h.lo + static_cast<float>(b + 1) * w;
        auto il = static_cast<long>(pyfloordiv(lower - m.lo, mw));
        auto ih = static_cast<long>(pyfloordiv(upper - m.lo, mw));
        il = std::min(il, static_cast<long>(bins) - 1);
        ih = std::min(ih, static_cast<long>(bins) - 1);
        if (il == ih) {
          m.c[static_cast<std::size_t>(il)] += h.c[b];
        } else {
          const float edge = m.lo + static_cast<float>(il + 1) * mw;
          const float f = (edge - lower) / (upper - lower);
          const auto low = static_cast<std::int64_t>(static_cast<float>(h.c[b]) * f);
          m.c[static_cast<std::size_t>(il)] += low;
          m.c[static_cast<std::size_t>(ih)] += h.c[b] - low;
        }
      }
    }
    h = m;
  }
  return h;
}

struct hfmg_out {
  float clip_min = 0, clip_max = 0;
  std::size_t best = 0;
  std::vector<double> losses;
  std::vector<std::pair<long, long>> ranges;
};

inline hfmg_out hfmg_search(const hist& h, int bits) {
  const long nb = static_cast<long>(h.c.size());
  std::int64_t total = 0;
  for (auto v : h.c)
    total += v;
  const auto step = std::max<std::int64_t>(
      static_cast<std::int64_t>(std::ceil(static_cast<double>(total) / 1e5)), 1);
  const long min_bins = static_cast<long>(std::ceil(static_cast<double>(nb) / 4.0));
  hfmg_out out;
  long L = 0, R = nb - 1;
  while (R - L > min_bins) {
    long tl = L, tr = R;
    std::int64_t sl = 0, sr = 0;
    while (tl < tr && sl < step)
      sl += h.c[static_cast<std::size_t>(tl++)];
    while (tl < tr && sr < step)
      sr += h.c[static_cast<std::size_t>(tr--)];
    if (R - tr >= tl - L) {
      R = tr;
    } else {
      L = tl;
    }
    out.ranges.emplace_back(L, R);
  }
  const float nbf = static_cast<float>(nb);
  const float w0 = (h.hi - h.lo) / nbf;
  const float w = ((h.lo + nbf * w0) - h.lo) / nbf;
  const float D = static_cast<float>(std::pow(2.0, bits));
  for (const auto& [l, r] : out.ranges) {
    const float d = w * static_cast<float>(r - l + 1) / D;
    const float half = d / 2.0f;
    double same = 0, left = 0, mid = 0, right = 0;
    for (long b = 0; b < nb; ++b) {
      if (h.c[static_cast<std::size_t>(b)] == 0)
        continue;  // contributes exactly 0
      const float rho = static_cast<float>(h.c[static_cast<std::size_t>(b)]) / w;
      const float a = static_cast<float>(b - l) * w, e = a + w;
      const float i = std::min(D - 1.0f, std::max(0.0f, pyfloordiv(a, d)));
      const float j = std::min(D - 1.0f, std::max(0.0f, pyfloordiv(e, d)));
      const float ci = i * d + half;
      auto norm = [rho](float u, float v) { return ((v * v * v - u * u * u) / 3.0f) * rho; };
      if (i == j) {
        same += double(norm(a - ci, e - ci));
      } else {
        left += double(norm(a - ci, half));
        mid += double((j - i - 1.0f) * norm(-half, half));
        right += double(norm(-half, (e - j * d) - half));
      }
    }
    double loss = ((same + left) + mid) + right;
    if (d < FLT_EPSILON)
      loss = 0.0;
    out.losses.push_back(loss);
    if (loss < out.losses[out.best])
      out.best = out.losses.size() - 1;
  }
  out.clip_min = h.lo + static_cast<float>(out.ranges[out.best].first) * w;
  out.clip_max = h.lo + static_cast<float>(out.ranges[out.best].second + 1) * w;
  return out;
}

/// DMQ from Cin-first matrices (rows = input channels), with the toolkit's masks.
struct dmq_out {
  bool error = false;
  std::vector<float> f;
};

inline dmq_out dmq(const std::vector<std::vector<float>>& xrows,
                   const std::vector<std::vector<float>>& wrows, double alpha) {
  const float eps = FLT_EPSILON;
  const std::size_t cin = xrows.size();
  std::vector<float> a(cin, 0.0f), w(cin, 0.0f);
  for (std::size_t c = 0; c < cin; ++c) {
    for (float v : xrows[c])
      a[c] = std::max(a[c], std::fabs(v));
    for (float v : wrows[c])
      w[c] = std::max(w[c], std::fabs(v));
  }
  dmq_out out;
  if (*std::max_element(a.begin(), a.end()) < eps || *std::max_element(w.begin(), w.end()) < eps) {
    out.f.assign(cin, 1.0f);
    return out;
  }
  std::vector<float> t(cin);
  for (std::size_t c = 0; c < cin; ++c) {
    t[c] = w[c] < eps ? 0.0f
                      : static_cast<float>(std::pow(double(a[c]), alpha)) /
                            static_cast<float>(std::pow(double(w[c]), 1.0 - alpha));
  }
  float ao = 0, wo = 0;
  for (std::size_t c = 0; c < cin; ++c) {
    const bool z = t[c] < eps;
    ao = std::max(ao, z ? 0.0f : a[c] / t[c]);
    wo = std::max(wo, z ? 0.0f : w[c] * t[c]);
  }
  for (std::size_t c = 0; c < cin; ++c) {
    const bool az = a[c] < eps, wz = w[c] < eps;
    if (az && wz)
      t[c] = 1.0f;
    if (az && !wz)
      t[c] = wo / w[c];
    if (!az && wz)
      t[c] = a[c] / ao;
  }
  for (float v : t) {
    if (!(v >= eps && v <= 1.0f / eps))
      out.error = true;
  }
  out.f = t;
  return out;
}

}  // namespace plain
