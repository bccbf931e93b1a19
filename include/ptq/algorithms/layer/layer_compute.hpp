// The layer arithmetic of AdaRound (docs/ada.md, Optimisation): forward pass and weight gradient of
// Linear, Conv2d and ConvTranspose2d on a minibatch, as GEMMs of the kernel_set. A convolution's
// GEMM reads its input's windows where they lie, in zero-padded planes (kernels/windows.hpp: no
// im2col matrix); ConvTranspose2d's forward scatters with col2im. Results are bit-identical for
// every thread count: threads only split the GEMM outputs into independent tiles (each C element
// is computed by one GEMM call, whatever the tiling) and copies / scatters by sample; the sum
// over samples of the weight gradient runs along the GEMM's k axis (samples concatenated), so it
// has one fixed order.
// The GEMM tiles and their threads are gemm_tasks.hpp.
// Depends on: core and kernels.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "ptq/algorithms/layer/gemm_tasks.hpp"
#include "ptq/algorithms/layer/layer_geometry.hpp"
#include "ptq/algorithms/layer/layer_windows.hpp"
#include "ptq/core/error.hpp"
#include "ptq/kernels/kernel_set.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Forward and weight gradient of one layer. Workspaces live in the object and are reused, so
/// after the first call of a given minibatch size no call allocates. Not for concurrent use:
/// one object per calling thread.
class layer_compute {
 public:
  /// `threads` 0 or 1 = the calling thread only. Check status() before use.
  explicit layer_compute(const layer_geometry& g, unsigned threads = 1,
                         const kernels::kernel_set& k = kernels::default_kernels())
      : g_(g), status_(validate_geometry(g)), k_(k), tasks_(k, threads) {
    if (status_.ok()) {
      oh_ = output_h(g);
      ow_ = output_w(g);
    }
  }

  /// Whether the geometry is valid (validate_geometry); forward / weight_grad return it if not.
  [[nodiscard]] const result<>& status() const noexcept { return status_; }
  [[nodiscard]] const layer_geometry& geometry() const noexcept { return g_; }
  [[nodiscard]] std::size_t out_h() const noexcept { return oh_; }
  [[nodiscard]] std::size_t out_w() const noexcept { return ow_; }
  [[nodiscard]] std::size_t input_size() const noexcept { return ptq::input_size(g_); }
  [[nodiscard]] std::size_t output_size() const noexcept { return ptq::output_size(g_); }
  [[nodiscard]] std::size_t weight_size() const noexcept { return ptq::weight_size(g_); }
  [[nodiscard]] unsigned threads() const noexcept { return tasks_.threads(); }
  void set_threads(unsigned threads) noexcept { tasks_.set_threads(threads); }

  /// y[n, output_size()] = layer(x[n, input_size()]) with weight w (PyTorch layout) and bias
  /// (out_channels values, or nullptr). y must not overlap x, w or bias.
  [[nodiscard]] result<> forward(const float* x, std::size_t n, const float* w, const float* bias,
                                 float* y) {
    if (!status_.ok())
      return status_;
    tasks_.clear();
    switch (g_.type) {
      case layer_type::linear:
        forward_linear(x, n, w, bias, y);
        break;
      case layer_type::conv2d:
        forward_conv(x, n, w, bias, y);
        break;
      default:
        forward_conv_transpose(x, n, w, bias, y);
        break;
    }
    return {};
  }

  /// dw[weight_size()] = d(sum dy·y)/dw over the n samples, for y = forward(x) (the bias does not
  /// matter). dw is overwritten; it must not overlap x or dy.
  [[nodiscard]] result<> weight_grad(const float* x, std::size_t n, const float* dy, float* dw) {
    if (!status_.ok())
      return status_;
    tasks_.clear();
    switch (g_.type) {
      case layer_type::linear:
        weight_grad_linear(x, n, dy, dw);
        break;
      case layer_type::conv2d:
        weight_grad_conv(x, n, dy, dw);
        break;
      default:
        weight_grad_conv_transpose(x, n, dy, dw);
        break;
    }
    return {};
  }

 private:
  /// cat[c][s*plane + p] = src[s][c][p]: samples side by side, so a GEMM's k axis runs over
  /// all of them in sample order.
  void concat_samples(const float* src, std::size_t n, std::size_t channels, std::size_t plane) {
    cat_.resize(n * channels * plane);
    float* cat = cat_.data();
    tasks_.run_blocks(n, [=](std::size_t s, std::size_t) {
      for (std::size_t c = 0; c < channels; ++c) {
        std::memcpy(cat + c * n * plane + s * plane, src + (s * channels + c) * plane,
                    plane * sizeof(float));
      }
    });
  }

  /// The windows of the convolution, per group (layer_windows.hpp).
  [[nodiscard]] kernels::window_geometry windows() const noexcept { return conv_windows(g_); }

  /// planes_[grp] = the zero-padded planes (kernels::pad_windows) of every sample's group grp of
  /// `img` ([n, C, H, W]), the samples one after the other: what the GEMMs read the windows from.
  void pad_samples(const float* img, std::size_t n, bool pixel_major) {
    const kernels::window_geometry w = windows();
    const std::size_t plane = w.img_h * w.img_w, groups = g_.groups, cimg = w.channels * groups;
    const std::size_t sf = kernels::padded_sample_floats(w);
    planes_.resize(groups * n * sf);
    float* out = planes_.data();
    const auto pad = k_.pad_windows;
    tasks_.run_blocks(n * groups, [=](std::size_t b, std::size_t) {
      const std::size_t s = b / groups, grp = b % groups;
      pad(w, pixel_major, img + (s * cimg + grp * w.channels) * plane, out + (grp * n + s) * sf);
    });
  }

  /// The windows of group grp of the n samples pad_samples laid out.
  [[nodiscard]] kernels::gemm_windows padded_windows(std::size_t grp, std::size_t n,
                                                     bool pixel_major) const noexcept {
    kernels::gemm_windows gw;
    gw.g = windows();
    gw.planes = planes_.data() + grp * n * kernels::padded_sample_floats(gw.g);
    gw.samples = n;
    gw.pixel_major = pixel_major;
    return gw;
  }

  void forward_linear(const float* x, std::size_t n, const float* w, const float* bias, float* y) {
    kernels::gemm_problem p;  // Y[n, cout] = X[n, cin] · W^T
    p.m = n;
    p.n = g_.out_channels;
    p.k = g_.in_channels;
    p.a = x;
    p.lda = g_.in_channels;
    p.b = w;
    p.ldb = g_.in_channels;
    p.trans_b = true;
    p.c = y;
    p.ldc = g_.out_channels;
    tasks_.add(p, nullptr, bias, 1);
    tasks_.run();
  }

  void weight_grad_linear(const float* x, std::size_t n, const float* dy, float* dw) {
    kernels::gemm_problem p;  // dW[cout, cin] = dY^T[cout, n] · X[n, cin]
    p.m = g_.out_channels;
    p.n = g_.in_channels;
    p.k = n;
    p.a = dy;
    p.lda = g_.out_channels;
    p.trans_a = true;
    p.b = x;
    p.ldb = g_.in_channels;
    p.c = dw;
    p.ldc = g_.in_channels;
    tasks_.add(p, nullptr, nullptr, 1);
    tasks_.run();
  }

  /// Per chunk of samples (their padded planes and outputs within chunk_floats), one GEMM
  /// per group over the chunk's samples side by side, then a copy into [n, cout, P]: the weight
  /// is packed once per chunk and GEMM block, not once per sample. Every output is the same
  /// k-ordered sum whatever the chunking, so the same bits.
  void forward_conv(const float* x, std::size_t n, const float* w, const float* bias, float* y) {
    if (depthwise()) {
      forward_depthwise(x, n, w, bias, y);
      return;
    }
    const std::size_t P = oh_ * ow_, in_sample = g_.in_channels * g_.in_h * g_.in_w;
    const std::size_t per_sample =
        g_.groups * kernels::padded_sample_floats(windows()) + g_.out_channels * P;
    const std::size_t chunk = samples_per_chunk(per_sample);
    for (std::size_t s0 = 0; s0 < n; s0 += chunk) {
      forward_conv_chunk(x + s0 * in_sample, std::min(chunk, n - s0), w, bias,
                         y + s0 * g_.out_channels * P);
    }
  }

  /// Samples per chunk for `per_sample` floats of workspace each: within chunk_floats, and a
  /// whole number per thread, so that the copies spread evenly.
  [[nodiscard]] std::size_t samples_per_chunk(std::size_t per_sample) const noexcept {
    std::size_t chunk = std::max<std::size_t>(1, chunk_floats / per_sample);
    if (chunk > tasks_.threads())
      chunk -= chunk % tasks_.threads();
    return chunk;
  }

  void forward_conv_chunk(const float* x, std::size_t n, const float* w, const float* bias,
                          float* y) {
    const std::size_t groups = g_.groups, cout_g = g_.out_channels / groups, P = oh_ * ow_;
    const std::size_t kdim = (g_.in_channels / groups) * g_.kernel_h * g_.kernel_w, ld = n * P;
    pad_samples(x, n, false);
    cat_.resize(g_.out_channels * ld);
    tasks_.clear();
    for (std::size_t grp = 0; grp < groups; ++grp) {
      kernels::gemm_problem p;  // Ycat_g[cout_g, n*P] = W_g[cout_g, kdim] · im2col_g[kdim, n*P]
      p.m = cout_g;
      p.n = ld;
      p.k = kdim;
      p.a = w + grp * cout_g * kdim;
      p.lda = kdim;
      const kernels::gemm_windows gw = padded_windows(grp, n, false);
      p.b_windows = &gw;
      p.c = cat_.data() + grp * cout_g * ld;
      p.ldc = ld;
      tasks_.add(p, bias == nullptr ? nullptr : bias + grp * cout_g, nullptr, groups);
    }
    tasks_.run();
    const float* cat = cat_.data();
    const std::size_t cout = g_.out_channels;
    tasks_.run_blocks(n, [=](std::size_t s, std::size_t) {
      for (std::size_t c = 0; c < cout; ++c)
        std::memcpy(y + (s * cout + c) * P, cat + c * ld + s * P, P * sizeof(float));
    });
  }

  /// Floats of padded planes and the other operand (or the outputs) per chunk of samples (about
  /// 4 MB, so that they stay in the last-level cache between the copies and the GEMMs).
  static constexpr std::size_t chunk_floats = std::size_t{1} << 20;

  /// dw_g[m, kdim] = sum over samples s of A_s,g[m, P] · im2col_s,g^T, where im2col is that of
  /// `img` and A the other operand (conv: dy and x; transpose: x and dy), a_channels =
  /// m·groups. Per chunk of samples, A is laid side by side and one GEMM per group runs with the
  /// samples along k, continuing the sums from the chunk before: every dw element is one
  /// k-ordered sum over all samples, whatever the chunking and the thread count. B is the
  /// windows as rows (kernels::gemm_windows, pixel-major planes), read along k like a row-major
  /// matrix instead of a transposed im2col; its columns come in (tap, channel) order, so the
  /// sums build up in dw_tc_ and are put in the weight's (channel, tap) order at the end.
  void weight_grad_chunked(const float* img, const float* a, std::size_t a_channels, std::size_t n,
                           float* dw) {
    const kernels::window_geometry win = windows();
    const std::size_t groups = g_.groups, m = a_channels / groups, C = win.channels;
    const std::size_t P = win.out_h * win.out_w, img_sample = C * groups * win.img_h * win.img_w;
    const std::size_t taps = win.kernel_h * win.kernel_w, kdim = C * taps;
    if (n == 0) {
      std::fill(dw, dw + groups * m * kdim, 0.0f);
      return;
    }
    const std::size_t chunk =
        samples_per_chunk(groups * kernels::padded_sample_floats(win) + a_channels * P);
    dw_tc_.resize(groups * m * kdim);
    for (std::size_t s0 = 0; s0 < n; s0 += chunk) {
      const std::size_t cnt = std::min(chunk, n - s0), ld = cnt * P;
      pad_samples(img + s0 * img_sample, cnt, true);
      concat_samples(a + s0 * a_channels * P, cnt, a_channels, P);
      tasks_.clear();
      for (std::size_t grp = 0; grp < groups; ++grp) {
        kernels::gemm_problem p;  // dw_g[m, kdim] (+)= Acat_g[m, cnt*P] · rows_g[cnt*P, kdim]
        p.m = m;
        p.n = kdim;
        p.k = ld;
        p.a = cat_.data() + grp * m * ld;
        p.lda = ld;
        const kernels::gemm_windows gw = padded_windows(grp, cnt, true);
        p.b_windows = &gw;
        p.c = dw_tc_.data() + grp * m * kdim;
        p.ldc = kdim;
        p.accumulate = s0 > 0;
        tasks_.add(p, nullptr, nullptr, groups);
      }
      tasks_.run();
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

  void weight_grad_conv(const float* x, std::size_t n, const float* dy, float* dw) {
    if (depthwise()) {
      const kernels::depthwise_problem p = depthwise_problem_of(g_);
      tasks_.prepare(depthwise_blocks(), p.scratch_floats());
      tasks_.run_blocks(depthwise_blocks(), [&](std::size_t b, std::size_t t) {
        const std::size_t c0 = b * depthwise_block;
        k_.depthwise_weight_grad(p, x, dy, n, c0, std::min(c0 + depthwise_block, p.channels), dw,
                                 tasks_.thread_buffer(t));
      });
      return;
    }
    weight_grad_chunked(x, dy, g_.out_channels, n, dw);
  }

  /// Channels per task of the depthwise kernels.
  static constexpr std::size_t depthwise_block = 16;

  /// A Conv2d whose every output channel reads one input channel of its own, with the kernel
  /// set's direct kernels (kernels/depthwise.hpp): no im2col, which would copy each input value
  /// once per tap for a GEMM of one row. The same sums as the GEMM path, so the same bits.
  [[nodiscard]] bool depthwise() const noexcept {
    return g_.type == layer_type::conv2d && g_.groups == g_.in_channels &&
           g_.groups == g_.out_channels && k_.depthwise_forward != nullptr &&
           k_.depthwise_weight_grad != nullptr;
  }
  [[nodiscard]] std::size_t depthwise_blocks() const noexcept {
    return (g_.in_channels + depthwise_block - 1) / depthwise_block;
  }

  /// One task per sample and block of channels.
  void forward_depthwise(const float* x, std::size_t n, const float* w, const float* bias,
                         float* y) {
    const kernels::depthwise_problem p = depthwise_problem_of(g_);
    const std::size_t nb = depthwise_blocks();
    const std::size_t in_sample = p.channels * p.in_h * p.in_w;
    const std::size_t out_sample = p.channels * p.out_h * p.out_w;
    tasks_.prepare(n * nb, p.scratch_floats());
    tasks_.run_blocks(n * nb, [&](std::size_t b, std::size_t t) {
      const std::size_t s = b / nb, c0 = (b % nb) * depthwise_block;
      k_.depthwise_forward(p, x + s * in_sample, w, bias, c0,
                           std::min(c0 + depthwise_block, p.channels), y + s * out_sample,
                           tasks_.thread_buffer(t));
    });
  }

  void forward_conv_transpose(const float* x, std::size_t n, const float* w, const float* bias,
                              float* y) {
    const std::size_t groups = g_.groups, cin_g = g_.in_channels / groups,
                      cout_g = g_.out_channels / groups, HW = g_.in_h * g_.in_w;
    const std::size_t rows = cout_g * g_.kernel_h * g_.kernel_w, ld = n * HW;
    concat_samples(x, n, g_.in_channels, HW);
    col_.resize(groups * rows * ld);
    for (std::size_t grp = 0; grp < groups; ++grp) {
      kernels::gemm_problem p;  // cols_g[rows, n*HW] = W_g^T[rows, cin_g] · Xcat_g[cin_g, n*HW]
      p.m = rows;
      p.n = ld;
      p.k = cin_g;
      p.a = w + grp * cin_g * rows;
      p.lda = rows;
      p.trans_a = true;
      p.b = cat_.data() + grp * cin_g * ld;
      p.ldb = ld;
      p.c = col_.data() + grp * rows * ld;
      p.ldc = ld;
      tasks_.add(p, nullptr, nullptr, groups);
    }
    tasks_.run();
    const kernels::window_geometry win = windows();
    const std::size_t P = oh_ * ow_;
    const float* col = col_.data();
    const std::size_t cout = g_.out_channels;
    tasks_.run_blocks(n * groups, [=](std::size_t b, std::size_t) {
      const std::size_t s = b / groups, grp = b % groups;
      float* img = y + (s * cout + grp * cout_g) * P;
      for (std::size_t c = 0; c < cout_g; ++c) {
        const float v = bias == nullptr ? 0.0f : bias[grp * cout_g + c];
        std::fill(img + c * P, img + (c + 1) * P, v);
      }
      kernels::col2im(win, col + grp * rows * ld + s * HW, ld, img);
    });
  }

  void weight_grad_conv_transpose(const float* x, std::size_t n, const float* dy, float* dw) {
    // The windows of dy that each input pixel of the transpose feeds, against x.
    weight_grad_chunked(dy, x, g_.in_channels, n, dw);
  }

  layer_geometry g_;
  result<> status_;
  kernels::kernel_set k_;
  std::size_t oh_ = 0;
  std::size_t ow_ = 0;
  detail::gemm_task_runner tasks_;
  std::vector<float> col_;     // the transpose's GEMM output (col2im's input)
  std::vector<float> planes_;  // padded planes of a chunk of samples (pad_samples)
  std::vector<float> cat_;     // samples side by side
  std::vector<float> dw_tc_;   // the weight gradient, columns in (tap, channel) order
};

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
