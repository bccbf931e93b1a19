// The convolution GEMMs of the layer arithmetic (layer_compute.hpp) over chunks of samples: the
// samples' zero-padded planes laid out per chunk (or once for all the samples a caller binds),
// Conv2d's forward pass as one windows GEMM per chunk and group, and the weight gradient of
// Conv2d and ConvTranspose2d as GEMMs whose k axis runs over the samples in order. Every output
// is one k-ordered sum whatever the chunking, the binding and the thread count: the same bits.
// Depends on: kernels.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "ptq/algorithms/layer/gemm_tasks.hpp"
#include "ptq/algorithms/layer/layer_geometry.hpp"
#include "ptq/algorithms/layer/layer_windows.hpp"
#include "ptq/kernels/kernel_set.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

/// The samples a layer call reads: sample s of the call at x + (index ? index[s] : s) * size.
struct sample_source {
  const float* x = nullptr;
  std::size_t size = 0;
  const std::size_t* index = nullptr;

  [[nodiscard]] const float* operator[](std::size_t s) const noexcept {
    return x + (index != nullptr ? index[s] : s) * size;
  }
  /// The samples from s0 on.
  [[nodiscard]] sample_source from(std::size_t s0) const noexcept {
    return index != nullptr ? sample_source{x, size, index + s0}
                            : sample_source{x + s0 * size, size, nullptr};
  }
};

class conv_gemm {
 public:
  /// For a valid geometry (validate_geometry); the GEMMs run on `tasks`.
  conv_gemm(const layer_geometry& g, const kernels::kernel_set& k, gemm_task_runner& tasks)
      : g_(g), win_(conv_windows(g)), pad_windows_(k.pad_windows), tasks_(&tasks) {}

  /// bound_[grp] = the pixel-major padded planes of group grp of `samples` Conv2d inputs
  /// (x[samples, input]), which weight_grad then reads for a call's samples by index instead
  /// of padding them again.
  void bind(const float* x, std::size_t samples) {
    pad(bound_, sample_source{x, ptq::input_size(g_), nullptr}, samples, true);
    bound_samples_ = samples;
  }

  /// cat[c][s*plane + p] = src[s][c][p]: samples side by side, so a GEMM's k axis runs over
  /// all of them in sample order.
  const float* concat_samples(const sample_source& src, std::size_t n, std::size_t channels,
                              std::size_t plane) {
    cat_.resize(n * channels * plane);
    float* cat = cat_.data();
    tasks_->run_blocks(n, [=](std::size_t s, std::size_t) {
      for (std::size_t c = 0; c < channels; ++c)
        std::memcpy(cat + c * n * plane + s * plane, src[s] + c * plane, plane * sizeof(float));
    });
    return cat;
  }

  /// Conv2d: y[n, cout, P] = the layer over the n samples of x. Per chunk of samples (their
  /// padded planes and outputs within chunk_floats), one GEMM per group over the chunk's
  /// samples side by side, then a copy into y: the weight is packed once per chunk and GEMM
  /// block, not once per sample.
  void forward(const sample_source& x, std::size_t n, const float* w, const float* bias, float* y) {
    const std::size_t P = win_.out_h * win_.out_w;
    const std::size_t per_sample =
        g_.groups * kernels::padded_sample_floats(win_) + g_.out_channels * P;
    const std::size_t chunk = samples_per_chunk(per_sample);
    for (std::size_t s0 = 0; s0 < n; s0 += chunk)
      forward_chunk(x.from(s0), std::min(chunk, n - s0), w, bias, y + s0 * g_.out_channels * P);
  }

  /// dw_g[m, kdim] = sum over samples s of A_s,g[m, P] · im2col_s,g^T, where im2col is that of
  /// `img` and A the other operand (Conv2d: dy and x; transpose: x and dy), a_channels =
  /// m·groups; `img_bound` = img's samples are indices into the bound samples. Per chunk of
  /// samples, A is laid side by side and one GEMM per group runs with the samples along k,
  /// continuing the sums from the chunk before: every dw element is one k-ordered sum over all
  /// samples. B is the windows as rows (kernels::gemm_windows, pixel-major planes), read along
  /// k like a row-major matrix instead of a transposed im2col; its columns come in (tap,
  /// channel) order, so the sums build up in dw_tc_ and are put in the weight's (channel, tap)
  /// order at the end.
  void weight_grad(const sample_source& img, bool img_bound, const sample_source& a,
                   std::size_t a_channels, std::size_t n, float* dw) {
    const std::size_t groups = g_.groups, m = a_channels / groups, C = win_.channels;
    const std::size_t P = win_.out_h * win_.out_w, taps = win_.kernel_h * win_.kernel_w;
    const std::size_t kdim = C * taps;
    if (n == 0) {
      std::fill(dw, dw + groups * m * kdim, 0.0f);
      return;
    }
    const std::size_t planes = img_bound ? 0 : groups * kernels::padded_sample_floats(win_);
    const std::size_t chunk = samples_per_chunk(planes + a_channels * P);
    dw_tc_.resize(groups * m * kdim);
    for (std::size_t s0 = 0; s0 < n; s0 += chunk) {
      const std::size_t cnt = std::min(chunk, n - s0), ld = cnt * P;
      if (!img_bound)
        pad(planes_, img.from(s0), cnt, true);
      const float* cat = concat_samples(a.from(s0), cnt, a_channels, P);
      tasks_->clear();
      for (std::size_t grp = 0; grp < groups; ++grp) {
        kernels::gemm_problem p;  // dw_g[m, kdim] (+)= Acat_g[m, cnt*P] · rows_g[cnt*P, kdim]
        p.m = m;
        p.n = kdim;
        p.k = ld;
        p.a = cat + grp * m * ld;
        p.lda = ld;
        const kernels::gemm_windows gw =
            img_bound ? windows_of(bound_, grp, bound_samples_, img.index + s0, cnt, true)
                      : windows_of(planes_, grp, cnt, nullptr, cnt, true);
        p.b_windows = &gw;
        p.c = dw_tc_.data() + grp * m * kdim;
        p.ldc = kdim;
        p.accumulate = s0 > 0;
        tasks_->add(p, nullptr, nullptr, groups);
      }
      tasks_->run();
    }
    for (std::size_t r = 0; r < groups * m; ++r) {
      const float* src = dw_tc_.data() + r * kdim;
      float* dst = dw + r * kdim;
      for (std::size_t t = 0; t < taps; ++t) {
        for (std::size_t c = 0; c < C; ++c)
          dst[c * taps + t] = src[t * C + c];
      }
    }
  }

 private:
  /// out[grp] = the padded planes (kernels::pad_windows) of group grp of the n samples of
  /// `img`, the samples one after the other: what the GEMMs read the windows from.
  void pad(std::vector<float>& out, const sample_source& img, std::size_t n, bool pixel_major) {
    const std::size_t groups = g_.groups, sf = kernels::padded_sample_floats(win_);
    const std::size_t group_floats = win_.channels * win_.img_h * win_.img_w;
    out.resize(groups * n * sf);
    float* planes = out.data();
    const auto pad_windows = pad_windows_;
    const kernels::window_geometry w = win_;
    tasks_->run_blocks(n * groups, [=](std::size_t b, std::size_t) {
      const std::size_t s = b / groups, grp = b % groups;
      pad_windows(w, pixel_major, img[s] + grp * group_floats, planes + (grp * n + s) * sf);
    });
  }

  /// The windows of group grp of the n samples `sample_of` picks (null: the first n) among the
  /// `laid_out` samples whose planes pad() wrote into `planes`.
  [[nodiscard]] kernels::gemm_windows windows_of(const std::vector<float>& planes, std::size_t grp,
                                                 std::size_t laid_out, const std::size_t* sample_of,
                                                 std::size_t n, bool pixel_major) const noexcept {
    kernels::gemm_windows gw;
    gw.g = win_;
    gw.planes = planes.data() + grp * laid_out * kernels::padded_sample_floats(win_);
    gw.samples = n;
    gw.sample_of = sample_of;
    gw.pixel_major = pixel_major;
    return gw;
  }

  /// Samples per chunk for `per_sample` floats of workspace each: within chunk_floats, and a
  /// whole number per thread, so that the copies spread evenly.
  [[nodiscard]] std::size_t samples_per_chunk(std::size_t per_sample) const noexcept {
    std::size_t chunk =
        std::max<std::size_t>(1, chunk_floats / std::max<std::size_t>(per_sample, 1));
    if (chunk > tasks_->threads())
      chunk -= chunk % tasks_->threads();
    return chunk;
  }

  void forward_chunk(const sample_source& x, std::size_t n, const float* w, const float* bias,
                     float* y) {
    const std::size_t groups = g_.groups, cout = g_.out_channels, cout_g = cout / groups;
    const std::size_t P = win_.out_h * win_.out_w, ld = n * P;
    const std::size_t kdim = win_.channels * win_.kernel_h * win_.kernel_w;
    pad(planes_, x, n, false);
    cat_.resize(cout * ld);
    tasks_->clear();
    for (std::size_t grp = 0; grp < groups; ++grp) {
      kernels::gemm_problem p;  // Ycat_g[cout_g, n*P] = W_g[cout_g, kdim] · im2col_g[kdim, n*P]
      p.m = cout_g;
      p.n = ld;
      p.k = kdim;
      p.a = w + grp * cout_g * kdim;
      p.lda = kdim;
      const kernels::gemm_windows gw = windows_of(planes_, grp, n, nullptr, n, false);
      p.b_windows = &gw;
      p.c = cat_.data() + grp * cout_g * ld;
      p.ldc = ld;
      tasks_->add(p, bias == nullptr ? nullptr : bias + grp * cout_g, nullptr, groups);
    }
    tasks_->run();
    const float* cat = cat_.data();
    tasks_->run_blocks(n, [=](std::size_t s, std::size_t) {
      for (std::size_t c = 0; c < cout; ++c)
        std::memcpy(y + (s * cout + c) * P, cat + c * ld + s * P, P * sizeof(float));
    });
  }

  /// Floats of padded planes and the other operand (or the outputs) per chunk of samples (about
  /// 4 MB, so that they stay in the last-level cache between the copies and the GEMMs).
  static constexpr std::size_t chunk_floats = std::size_t{1} << 20;

  layer_geometry g_;
  kernels::window_geometry win_;
  decltype(kernels::kernel_set::pad_windows) pad_windows_;
  gemm_task_runner* tasks_;
  std::vector<float> planes_;  // padded planes of a chunk of samples
  std::vector<float> bound_;   // pixel-major padded planes of the bound samples (bind)
  std::size_t bound_samples_ = 0;
  std::vector<float> cat_;    // samples side by side
  std::vector<float> dw_tc_;  // the weight gradient, columns in (tap, channel) order
};

}  // namespace detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
