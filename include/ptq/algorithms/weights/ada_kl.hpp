// The initial AdaRound weight scale (docs/ada.md, Initial scale): a KL-divergence search over 20
// symmetric clipping windows of a 512-bin histogram, per output channel or per tensor, symmetric
// 8-bit, offset 0. Checked against the toolkit's own `ada_round/kl_divergence.py` where the
// algorithm's description is silent; every precision decision is in docs/ada.md, "Initial scale
// (KL search)".
// Depends on: core and kernels.
#pragma once

#include <array>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "ptq/algorithms/layer/tensor.hpp"
#include "ptq/algorithms/weights/arq.hpp"
#include "ptq/core/error.hpp"
#include "ptq/core/quant.hpp"
#include "ptq/kernels/kernel_set.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

namespace detail {

inline constexpr std::size_t kl_histogram_bins = 512;  ///< bins over [-T, T]
inline constexpr std::size_t kl_search_windows = 20;   ///< windows [i, 512 - i), i = 0..19
inline constexpr std::size_t kl_quant_bins = 255;      ///< 2^8 - 1 groups of the candidate Q

/// The largest max|w| the search accepts: binning computes (x + T) · 512 in float32 (as torch's
/// histc does), which must stay finite. Above it the toolkit's histogram is undefined.
inline constexpr float kl_max_absmax = FLT_MAX / 1024.0f;

/// Counts of the 512 bins (64-bit: the toolkit's float32 counts are exact only below 2^24).
using kl_histogram = std::array<std::int64_t, kl_histogram_bins>;

/// The outcome of one search: the processed scale, T = max|w| and the chosen window i.
struct kl_search_result {
  float scale = 1.0f;
  float absmax = 0.0f;
  std::size_t window = 0;
};

/// numpy's pairwise summation of float64 (`np.sum` of a contiguous array): below 8 elements a
/// plain loop, up to 128 eight interleaved accumulators combined as a tree, above that the two
/// halves (split at a multiple of 8) summed recursively. Reproducing the order makes the
/// normalisation and the KL sum bit-identical to the toolkit's, given the same elements.
[[nodiscard]] inline double numpy_pairwise_sum(const double* a, std::size_t n) noexcept {
  if (n < 8) {
    double s = 0.0;
    for (std::size_t i = 0; i < n; ++i)
      s += a[i];
    return s;
  }
  if (n <= 128) {
    double r[8];
    for (std::size_t j = 0; j < 8; ++j)
      r[j] = a[j];
    std::size_t i = 8;
    for (; i < n - n % 8; i += 8) {
      for (std::size_t j = 0; j < 8; ++j)
        r[j] += a[i + j];
    }
    double s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i)
      s += a[i];
    return s;
  }
  std::size_t half = n / 2;
  half -= half % 8;
  return numpy_pairwise_sum(a, half) + numpy_pairwise_sum(a + half, n - half);
}

/// The toolkit's smoothing of a distribution in place: zeros become 1e-4 and every nonzero entry
/// gets 1e-4·#zeros/#nonzeros added, unless that increment is >= 1 (then nothing changes).
/// Returns false when every entry is zero (the toolkit divides by zero there; the search never
/// builds such a distribution, see kl_window_divergence).
inline bool kl_smooth(double* h, std::size_t n) noexcept {
  std::size_t zeros = 0;
  for (std::size_t k = 0; k < n; ++k)
    zeros += h[k] == 0.0 ? 1 : 0;
  if (zeros == n)
    return false;
  constexpr double eps = 1e-4;
  // Evaluated as the toolkit writes it: (eps · zeros) / nonzeros, in double.
  const double inc = eps * static_cast<double>(zeros) / static_cast<double>(n - zeros);
  if (inc >= 1.0)
    return true;
  for (std::size_t k = 0; k < n; ++k)
    h[k] = h[k] == 0.0 ? eps : h[k] + inc;
  return true;
}

/// KL(P || Q) of window i (0 <= i < 20) of a 512-bin histogram, in double:
/// - P: bins [i, 512 - i), with the mass left of the window added to its first bin and the mass
///   right of it to its last bin;
/// - Q: P split into 255 groups (group j covers [ceil(j·m), ceil((j+1)·m)), m = len/255, the last
///   ends at len); each group's sum spread evenly over the group's nonzero positions of P;
/// - both smoothed (detail::kl_smooth), normalised, KL = Σ p·log(p/q) (numpy's summation order).
/// Q is built from P *after* the outlier folding (the toolkit's code; its description leaves this
/// open), so Q is nonzero exactly where P is, and P is never all-zero when the histogram is not.
/// Returns +Inf for an all-zero histogram.
[[nodiscard]] inline double kl_window_divergence(const kl_histogram& h, std::size_t window) {
  if (window >= kl_search_windows)
    return std::numeric_limits<double>::infinity();
  const std::size_t len = kl_histogram_bins - 2 * window;
  std::array<double, kl_histogram_bins> p{};
  std::array<double, kl_histogram_bins> q{};
  std::int64_t left = 0;
  std::int64_t right = 0;
  for (std::size_t b = 0; b < window; ++b) {
    left += h[b];
    right += h[kl_histogram_bins - 1 - b];
  }
  // Integer counts: every sum below is exact in double (below 2^53), as it is in the toolkit's
  // Python floats.
  for (std::size_t k = 0; k < len; ++k)
    p[k] = static_cast<double>(h[window + k]);
  p[0] += static_cast<double>(left);
  p[len - 1] += static_cast<double>(right);
  for (std::size_t j = 0; j < kl_quant_bins; ++j) {
    // ceil(j·len/255) in integers. The toolkit computes ceil(j * (len / 255)) in double; for the
    // 20 window lengths (474..512) both agree for every j (checked exhaustively).
    const std::size_t begin = (j * len + kl_quant_bins - 1) / kl_quant_bins;
    const std::size_t end =
        j + 1 == kl_quant_bins ? len : ((j + 1) * len + kl_quant_bins - 1) / kl_quant_bins;
    double sum = 0.0;
    std::size_t nonzero = 0;
    for (std::size_t k = begin; k < end; ++k) {
      sum += p[k];
      nonzero += p[k] != 0.0 ? 1 : 0;
    }
    if (nonzero == 0)
      continue;
    const double share = sum / static_cast<double>(nonzero);
    for (std::size_t k = begin; k < end; ++k)
      q[k] = p[k] != 0.0 ? share : 0.0;
  }
  if (!detail::kl_smooth(p.data(), len) || !detail::kl_smooth(q.data(), len))
    return std::numeric_limits<double>::infinity();
  const double sp = 0.0 + detail::numpy_pairwise_sum(p.data(), len);
  const double sq = 0.0 + detail::numpy_pairwise_sum(q.data(), len);
  std::array<double, kl_histogram_bins> terms{};
  for (std::size_t k = 0; k < len; ++k) {
    const double pn = p[k] / sp;
    const double qn = q[k] / sq;
    terms[k] = pn * std::log(pn / qn);
  }
  return 0.0 + detail::numpy_pairwise_sum(terms.data(), len);
}

/// The window with the smallest divergence; ties (and NaN) keep the earlier window, as the
/// toolkit's strict `kl < kl_min` does.
[[nodiscard]] inline std::size_t kl_best_window(const kl_histogram& h) {
  std::size_t best = 0;
  double best_kl = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < kl_search_windows; ++i) {
    const double kl = kl_window_divergence(h, i);
    if (kl < best_kl) {
      best_kl = kl;
      best = i;
    }
  }
  return best;
}

/// The scale of window i before process_scale, in float32 as the toolkit's tensors compute it:
/// width = 2T/512, threshold = T - float32(i·width), scale = threshold/128.
[[nodiscard]] inline float kl_window_scale(float absmax, std::size_t window) noexcept {
  const float width = (absmax + absmax) / static_cast<float>(kl_histogram_bins);
  // i·width is exact in double (24 + 5 significant bits); the explicit rounding to float is the
  // toolkit's float32 product and keeps a compiler from fusing it into an FMA with the
  // subtraction (which would skip that rounding).
  const auto step = static_cast<float>(static_cast<double>(window) * static_cast<double>(width));
  return (absmax - step) / 128.0f;
}

inline constexpr std::size_t no_channel = static_cast<std::size_t>(-1);

/// The search on values already checked finite with T = absmax; `fill(lo, hi, counts)` adds the
/// histogram of every value of the channel (or tensor) to `counts`. Errors name the tensor and,
/// unless it is no_channel, the output channel.
template <class Fill>
[[nodiscard]] result<kl_search_result> kl_search(float absmax, std::string_view name,
                                                 std::size_t channel, Fill&& fill) {
  const auto where = [&] {
    std::string s(name);
    if (channel != no_channel)
      s += " channel " + std::to_string(channel);
    return s;
  };
  kl_search_result r;
  r.absmax = absmax;
  if (absmax == 0.0f)
    return r;  // the toolkit skips the search: scale 1 (process_scale keeps it)
  if (!(absmax <= kl_max_absmax)) {
    return make_error(errc::out_of_range, where() + ": max|w| = " + std::to_string(absmax) +
                                              " is too large for the 512-bin histogram (limit " +
                                              std::to_string(kl_max_absmax) + ")");
  }
  kl_histogram h{};
  fill(-absmax, absmax, h.data());
  r.window = kl_best_window(h);
  auto p = process_scale(kl_window_scale(absmax, r.window), 0.0f, false, 8);
  if (!p)
    return make_error(p.error().code, where() + ": " + p.error().message);
  r.scale = p.value().scale;
  return r;
}

/// The KL search on one channel's (or one tensor's) values: checks them (empty, NaN/Inf name
/// `name` and the index within x), takes T = max|x| and returns the processed scale, T and the
/// chosen window. T == 0 gives scale 1, window 0.
[[nodiscard]] inline result<kl_search_result> kl_init_scale(
    const float* x, std::size_t n, std::string_view name = "weight",
    const kernels::kernel_set& k = kernels::default_kernels()) {
  auto mm = checked_minmax(name, x, n, k.minmax);
  if (!mm)
    return mm.error();
  const float absmax = std::fmax(std::fabs(mm.value().min), std::fabs(mm.value().max));
  return detail::kl_search(absmax, name, detail::no_channel,
                           [&](float lo, float hi, std::int64_t* counts) {
                             k.histogram(x, n, lo, hi, kl_histogram_bins, counts);
                           });
}

}  // namespace detail

/// The initial AdaRound scale_w / offset_w of a weight in native layout (as arq_calibrate:
/// [Cout, Cin/g, k...], [Cout, Cin], ConvTranspose [Cin, Cout/g, k...] with output channel
/// o = gi·(Cout/g) + j): one KL search per output channel, or one over the whole tensor.
/// Symmetric 8-bit, offsets 0. Which layer types may use ADA is the config resolver's business.
[[nodiscard]] inline result<weight_quant_result> ada_kl_calibrate(
    const tensor_view& w, layer_type op, std::size_t groups, bool channel_wise,
    const kernels::kernel_set& k = kernels::default_kernels()) {
  if (auto st = check_tensor_view(w); !st)
    return st.error();
  auto geo = output_channels(w.shape, op, groups, w.name);
  if (!geo)
    return geo.error();
  const channel_geometry& g = geo.value();
  std::vector<float> scratch;
  const float* data = float_values(w, scratch);
  weight_quant_result out;
  out.bits = 8;
  if (!channel_wise) {
    auto r = detail::kl_init_scale(data, w.size(), w.name, k);
    if (!r)
      return r.error();
    out.scale.push_back(r.value().scale);
    out.offset.push_back(0);
    return out;
  }
  // The whole tensor is checked first (like the toolkit's check_quant_data), so a NaN is
  // reported with its flat index whatever channel it is in.
  auto all = checked_minmax(w.name, data, w.size(), k.minmax);
  if (!all)
    return all.error();
  out.scale.reserve(g.channels);
  out.offset.assign(g.channels, 0);
  for (std::size_t o = 0; o < g.channels; ++o) {
    bool bad = false;
    const kernels::minmax_result m = detail::channel_minmax(data, g, o, k, bad);
    const float absmax = std::fmax(std::fabs(m.min), std::fabs(m.max));
    auto r = detail::kl_search(absmax, w.name, o, [&](float lo, float hi, std::int64_t* counts) {
      for (std::size_t s = 0; s < g.segments_per_channel; ++s)
        k.histogram(data + g.offset(o, s), g.segment, lo, hi, detail::kl_histogram_bins, counts);
    });
    if (!r)
      return r.error();
    out.scale.push_back(r.value().scale);
  }
  return out;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
