// The layer arithmetic of AdaRound (docs/ada.md, Optimisation): forward pass and weight gradient of
// Linear, Conv2d and ConvTranspose2d on a minibatch, as GEMMs of the kernel_set. A convolution's
// GEMM reads its input's windows where they lie, in zero-padded planes (kernels/windows.hpp: no
// im2col matrix); ConvTranspose2d's forward scatters with col2im. Results are bit-identical for
// every thread count: threads only split the GEMM outputs into independent tiles (each C element
// is computed by one GEMM call, whatever the tiling) and copies / scatters by sample; the sum
// over samples of the weight gradient runs along the GEMM's k axis (samples concatenated), so it
// has one fixed order.
// The GEMM tiles and their threads are gemm_tasks.hpp, the convolution GEMMs over chunks of
// samples conv_gemm.hpp.
// Depends on: core and kernels.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "ptq/algorithms/layer/conv_gemm.hpp"
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
      : g_(g),
        status_(validate_geometry(g)),
        k_(k),
        tasks_(k, threads),
        conv_(status_.ok() ? g : layer_geometry{}, k, tasks_) {
    if (status_.ok()) {
      oh_ = output_h(g);
      ow_ = output_w(g);
    }
  }
  layer_compute(const layer_compute&) = delete;  // conv_ refers to tasks_
  layer_compute& operator=(const layer_compute&) = delete;

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
    run_forward(detail::sample_source{x, input_size(), nullptr}, n, w, bias, y);
    return {};
  }

  /// dw[weight_size()] = d(sum dy·y)/dw over the n samples, for y = forward(x) (the bias does not
  /// matter). dw is overwritten; it must not overlap x or dy.
  [[nodiscard]] result<> weight_grad(const float* x, std::size_t n, const float* dy, float* dw) {
    if (!status_.ok())
      return status_;
    run_weight_grad(detail::sample_source{x, input_size(), nullptr}, false, n, dy, dw);
    return {};
  }

  /// Binds `samples` inputs (x[samples, input_size()]) for forward_bound and weight_grad_bound,
  /// which take minibatches of them by index: no minibatch is copied, and a Conv2d lays out the
  /// padded planes its weight gradient reads once here, for every sample, instead of once per
  /// call (docs/ada.md, Memory). x must stay valid and unchanged while bound (until the next
  /// bind or the object's end).
  [[nodiscard]] result<> bind_inputs(const float* x, std::size_t samples) {
    if (!status_.ok())
      return status_;
    bound_ = x;
    bound_samples_ = samples;
    if (g_.type == layer_type::conv2d && !depthwise())
      conv_.bind(x, samples);
    return {};
  }

  /// forward of the bound samples index[0, n) (bind_inputs).
  [[nodiscard]] result<> forward_bound(const std::size_t* index, std::size_t n, const float* w,
                                       const float* bias, float* y) {
    if (auto c = check_bound(index, n); !c)
      return c;
    run_forward(detail::sample_source{bound_, input_size(), index}, n, w, bias, y);
    return {};
  }

  /// weight_grad of the bound samples index[0, n) (bind_inputs).
  [[nodiscard]] result<> weight_grad_bound(const std::size_t* index, std::size_t n, const float* dy,
                                           float* dw) {
    if (auto c = check_bound(index, n); !c)
      return c;
    run_weight_grad(detail::sample_source{bound_, input_size(), index}, true, n, dy, dw);
    return {};
  }

 private:
  [[nodiscard]] result<> check_bound(const std::size_t* index, std::size_t n) const {
    if (!status_.ok())
      return status_;
    for (std::size_t i = 0; i < n; ++i) {
      if (index[i] >= bound_samples_) {
        return make_error(errc::out_of_range, "layer_compute: sample index " +
                                                  std::to_string(index[i]) + " is not one of the " +
                                                  std::to_string(bound_samples_) +
                                                  " bound samples");
      }
    }
    return {};
  }

  void run_forward(const detail::sample_source& x, std::size_t n, const float* w, const float* bias,
                   float* y) {
    tasks_.clear();
    if (g_.type == layer_type::linear) {
      forward_linear(contiguous(x, n), n, w, bias, y);
    } else if (depthwise()) {
      forward_depthwise(x, n, w, bias, y);
    } else if (g_.type == layer_type::conv2d) {
      conv_.forward(x, n, w, bias, y);
    } else {
      forward_conv_transpose(x, n, w, bias, y);
    }
  }

  /// `bound` = x's samples are indices into the bound samples.
  void run_weight_grad(const detail::sample_source& x, bool bound, std::size_t n, const float* dy,
                       float* dw) {
    tasks_.clear();
    const std::size_t cin = g_.in_channels, cout = g_.out_channels, P = oh_ * ow_;
    if (g_.type == layer_type::linear) {
      weight_grad_linear(contiguous(x, n), n, dy, dw);
    } else if (depthwise()) {
      weight_grad_depthwise(x, n, dy, dw);
    } else if (g_.type == layer_type::conv2d) {
      conv_.weight_grad(x, bound, detail::sample_source{dy, cout * P, nullptr}, cout, n, dw);
    } else {  // the windows of dy that each input pixel of the transpose feeds, against x
      conv_.weight_grad(detail::sample_source{dy, cout * P, nullptr}, false, x, cin, n, dw);
    }
  }

  /// The samples of x one after the other: x itself, or gathered by index into gather_.
  [[nodiscard]] const float* contiguous(const detail::sample_source& x, std::size_t n) {
    if (x.index == nullptr)
      return x.x;
    gather_.resize(n * x.size);
    for (std::size_t s = 0; s < n; ++s)
      std::copy_n(x[s], x.size, gather_.data() + s * x.size);
    return gather_.data();
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

  /// Channels per task of the depthwise kernels.
  static constexpr std::size_t depthwise_block = 16;

  /// A Conv2d whose every output channel reads one input channel of its own, with the kernel
  /// set's direct kernels (kernels/depthwise.hpp): no windows GEMM, which would be a GEMM of
  /// one row per channel. The same sums as the GEMM path, so the same bits.
  [[nodiscard]] bool depthwise() const noexcept {
    return g_.type == layer_type::conv2d && g_.groups == g_.in_channels &&
           g_.groups == g_.out_channels && k_.depthwise_forward != nullptr &&
           k_.depthwise_weight_grad != nullptr;
  }
  [[nodiscard]] std::size_t depthwise_blocks() const noexcept {
    return (g_.in_channels + depthwise_block - 1) / depthwise_block;
  }

  /// One task per sample and block of channels.
  void forward_depthwise(const detail::sample_source& x, std::size_t n, const float* w,
                         const float* bias, float* y) {
    const kernels::depthwise_problem p = depthwise_problem_of(g_);
    const std::size_t nb = depthwise_blocks();
    const std::size_t out_sample = p.channels * p.out_h * p.out_w;
    tasks_.prepare(n * nb, p.scratch_floats());
    tasks_.run_blocks(n * nb, [&](std::size_t b, std::size_t t) {
      const std::size_t s = b / nb, c0 = (b % nb) * depthwise_block;
      k_.depthwise_forward(p, x[s], w, bias, c0, std::min(c0 + depthwise_block, p.channels),
                           y + s * out_sample, tasks_.thread_buffer(t));
    });
  }

  /// One task per block of channels, over all the samples (the kernel reads them contiguous).
  void weight_grad_depthwise(const detail::sample_source& x, std::size_t n, const float* dy,
                             float* dw) {
    const kernels::depthwise_problem p = depthwise_problem_of(g_);
    const float* xs = contiguous(x, n);
    tasks_.prepare(depthwise_blocks(), p.scratch_floats());
    tasks_.run_blocks(depthwise_blocks(), [&](std::size_t b, std::size_t t) {
      const std::size_t c0 = b * depthwise_block;
      k_.depthwise_weight_grad(p, xs, dy, n, c0, std::min(c0 + depthwise_block, p.channels), dw,
                               tasks_.thread_buffer(t));
    });
  }

  /// ConvTranspose2d: a GEMM into the columns of every input pixel's contributions, then
  /// col2im scatters them into the output.
  void forward_conv_transpose(const detail::sample_source& x, std::size_t n, const float* w,
                              const float* bias, float* y) {
    const std::size_t groups = g_.groups, cin_g = g_.in_channels / groups,
                      cout_g = g_.out_channels / groups, HW = g_.in_h * g_.in_w;
    const std::size_t rows = cout_g * g_.kernel_h * g_.kernel_w, ld = n * HW;
    const float* cat = conv_.concat_samples(x, n, g_.in_channels, HW);
    col_.resize(groups * rows * ld);
    for (std::size_t grp = 0; grp < groups; ++grp) {
      kernels::gemm_problem p;  // cols_g[rows, n*HW] = W_g^T[rows, cin_g] · Xcat_g[cin_g, n*HW]
      p.m = rows;
      p.n = ld;
      p.k = cin_g;
      p.a = w + grp * cin_g * rows;
      p.lda = rows;
      p.trans_a = true;
      p.b = cat + grp * cin_g * ld;
      p.ldb = ld;
      p.c = col_.data() + grp * rows * ld;
      p.ldc = ld;
      tasks_.add(p, nullptr, nullptr, groups);
    }
    tasks_.run();
    const kernels::window_geometry win = conv_windows(g_);
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

  layer_geometry g_;
  result<> status_;
  kernels::kernel_set k_;
  std::size_t oh_ = 0;
  std::size_t ow_ = 0;
  detail::gemm_task_runner tasks_;
  detail::conv_gemm conv_;
  const float* bound_ = nullptr;  // bind_inputs
  std::size_t bound_samples_ = 0;
  std::vector<float> col_;     // the transpose's GEMM output (col2im's input)
  std::vector<float> gather_;  // a minibatch of bound samples, where a kernel needs them in a row
};

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
