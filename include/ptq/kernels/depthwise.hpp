// Depthwise Conv2d (one input channel per output channel) without im2col: the forward pass of one
// sample and the weight gradient over a minibatch, for AdaRound's layer arithmetic. Each output
// is the sum the im2col + GEMM path computes, term for term: the GEMM's k order (the taps in
// row-major order; for the weight gradient the samples, then the output positions), a padded
// tap read as 0 and still multiplied in, the running sum in float, and the multiply-add fused
// exactly when the GEMM of the same arch fuses it (gemm_uses_fma). So both paths give the same
// bits, without the 9x copy of the input that im2col makes for a 3x3 kernel.
// Depends on: core.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "ptq/core/abi.hpp"
#include "ptq/kernels/gemm.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace kernels {

/// The geometry of a depthwise Conv2d: `channels` planes of in_h x in_w, a kernel_h x kernel_w
/// window per channel. Strides and dilations are at least 1, and the output size is PyTorch's, so
/// every window lies inside the zero-padded plane.
struct depthwise_problem {
  std::size_t channels = 0;
  std::size_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  std::size_t kernel_h = 1, kernel_w = 1;
  std::size_t stride_h = 1, stride_w = 1;
  std::size_t pad_h = 0, pad_w = 0;
  std::size_t dilation_h = 1, dilation_w = 1;

  [[nodiscard]] std::size_t padded_h() const noexcept { return in_h + 2 * pad_h; }
  [[nodiscard]] std::size_t padded_w() const noexcept { return in_w + 2 * pad_w; }
  /// Floats of scratch the kernels need: a zero-padded plane and an output plane for each of up
  /// to 16 channels (the SIMD weight gradient works on one channel per lane).
  [[nodiscard]] std::size_t scratch_floats() const noexcept {
    return (padded_h() * padded_w() + out_h * out_w) * 16;
  }
};

namespace detail {

/// plane [in_h, in_w] into out [padded_h, padded_w], zeros around: what im2col reads for a tap
/// in the padding.
inline void depthwise_pad(const depthwise_problem& p, const float* plane, float* out) noexcept {
  const std::size_t pw = p.padded_w();
  std::fill(out, out + p.pad_h * pw, 0.0f);
  for (std::size_t y = 0; y < p.in_h; ++y) {
    float* row = out + (p.pad_h + y) * pw;
    std::fill(row, row + p.pad_w, 0.0f);
    std::copy(plane + y * p.in_w, plane + (y + 1) * p.in_w, row + p.pad_w);
    std::fill(row + p.pad_w + p.in_w, row + pw, 0.0f);
  }
  std::fill(out + (p.pad_h + p.in_h) * pw, out + p.padded_h() * pw, 0.0f);
}

/// One output: `start` plus each tap of the window whose corner is `at`, in row-major tap order.
template <bool Fused>
[[nodiscard]] inline float depthwise_output(const depthwise_problem& p, const float* at,
                                            const float* wc, float start) noexcept {
  float acc = start;
  for (std::size_t ky = 0; ky < p.kernel_h; ++ky) {
    const float* row = at + ky * p.dilation_h * p.padded_w();
    for (std::size_t kx = 0; kx < p.kernel_w; ++kx)
      acc = ref_madd<Fused>(wc[ky * p.kernel_w + kx], row[kx * p.dilation_w], acc);
  }
  return acc;
}

/// Outputs [ox0, out_w) of row oy of one channel, one at a time.
template <bool Fused>
void depthwise_row_tail(const depthwise_problem& p, const float* padded, const float* wc,
                        float start, std::size_t oy, std::size_t ox0, float* yrow) noexcept {
  const float* top = padded + oy * p.stride_h * p.padded_w();
  for (std::size_t ox = ox0; ox < p.out_w; ++ox)
    yrow[ox] = depthwise_output<Fused>(p, top + ox * p.stride_w, wc, start);
}

template <bool Fused>
void depthwise_forward_loop(const depthwise_problem& p, const float* x, const float* w,
                            const float* bias, std::size_t c0, std::size_t c1, float* y,
                            float* scratch) noexcept {
  const std::size_t plane = p.in_h * p.in_w, taps = p.kernel_h * p.kernel_w;
  for (std::size_t c = c0; c < c1; ++c) {
    depthwise_pad(p, x + c * plane, scratch);
    const float start = bias == nullptr ? 0.0f : bias[c];
    for (std::size_t oy = 0; oy < p.out_h; ++oy) {
      depthwise_row_tail<Fused>(p, scratch, w + c * taps, start, oy, 0,
                                y + (c * p.out_h + oy) * p.out_w);
    }
  }
}

/// Taps summed side by side in the weight gradient (independent sums kept in registers).
inline constexpr std::size_t depthwise_tap_group = 16;

template <bool Fused>
void depthwise_weight_grad_loop(const depthwise_problem& p, const float* x, const float* dy,
                                std::size_t n, std::size_t c0, std::size_t c1, float* dw,
                                float* scratch) noexcept {
  const std::size_t plane = p.in_h * p.in_w, out_plane = p.out_h * p.out_w, pw = p.padded_w();
  const std::size_t taps = p.kernel_h * p.kernel_w;
  for (std::size_t c = c0; c < c1; ++c) {
    for (std::size_t t0 = 0; t0 < taps; t0 += depthwise_tap_group) {
      const std::size_t nt = std::min(depthwise_tap_group, taps - t0);
      std::size_t offset[depthwise_tap_group] = {};  // of each tap from its window's corner
      float acc[depthwise_tap_group] = {};
      for (std::size_t t = 0; t < nt; ++t) {
        const std::size_t ky = (t0 + t) / p.kernel_w, kx = (t0 + t) % p.kernel_w;
        offset[t] = ky * p.dilation_h * pw + kx * p.dilation_w;
      }
      for (std::size_t s = 0; s < n; ++s) {
        depthwise_pad(p, x + (s * p.channels + c) * plane, scratch);
        const float* dyc = dy + (s * p.channels + c) * out_plane;
        for (std::size_t oy = 0; oy < p.out_h; ++oy) {
          const float* top = scratch + oy * p.stride_h * pw;
          for (std::size_t ox = 0; ox < p.out_w; ++ox) {
            const float d = dyc[oy * p.out_w + ox];
            const float* at = top + ox * p.stride_w;
            for (std::size_t t = 0; t < nt; ++t)
              acc[t] = ref_madd<Fused>(d, at[offset[t]], acc[t]);
          }
        }
      }
      for (std::size_t t = 0; t < nt; ++t)
        dw[c * taps + t0 + t] = acc[t];
    }
  }
}

}  // namespace detail

/// Scalar reference (unfused, as gemm_ref_unfused): y[c, oy, ox] for channels [c0, c1) of one
/// sample x [channels, in_h, in_w], weight w [channels, kernel_h, kernel_w], bias or null;
/// `scratch` holds p.scratch_floats().
inline void depthwise_forward_ref(const depthwise_problem& p, const float* x, const float* w,
                                  const float* bias, std::size_t c0, std::size_t c1, float* y,
                                  float* scratch) noexcept {
  detail::depthwise_forward_loop<false>(p, x, w, bias, c0, c1, y, scratch);
}

/// Scalar reference: dw[c, ky, kx] for channels [c0, c1) over n samples of x [n, channels, in_h,
/// in_w] and dy [n, channels, out_h, out_w] (overwritten, not accumulated).
inline void depthwise_weight_grad_ref(const depthwise_problem& p, const float* x, const float* dy,
                                      std::size_t n, std::size_t c0, std::size_t c1, float* dw,
                                      float* scratch) noexcept {
  detail::depthwise_weight_grad_loop<false>(p, x, dy, n, c0, c1, dw, scratch);
}

/// The forward pass of Arch: the same sums as gemm_simd<Arch> over the im2col, bit for bit. With
/// a horizontal stride of 1 the outputs of a row are computed a batch at a time, one lane per
/// output (each lane's sum in the same order as the reference's).
template <class Arch>
void depthwise_forward_arch(const depthwise_problem& p, const float* x, const float* w,
                            const float* bias, std::size_t c0, std::size_t c1, float* y,
                            float* scratch) noexcept {
  constexpr bool fused = gemm_uses_fma<Arch>;
  if (p.stride_w != 1) {
    detail::depthwise_forward_loop<fused>(p, x, w, bias, c0, c1, y, scratch);
    return;
  }
  using B = detail::fbatch<Arch>;
  constexpr std::size_t W = B::size;
  const std::size_t plane = p.in_h * p.in_w, taps = p.kernel_h * p.kernel_w, pw = p.padded_w();
  for (std::size_t c = c0; c < c1; ++c) {
    detail::depthwise_pad(p, x + c * plane, scratch);
    const float* wc = w + c * taps;
    const float start = bias == nullptr ? 0.0f : bias[c];
    for (std::size_t oy = 0; oy < p.out_h; ++oy) {
      const float* top = scratch + oy * p.stride_h * pw;
      float* yrow = y + (c * p.out_h + oy) * p.out_w;
      std::size_t ox = 0;
      for (; ox + W <= p.out_w; ox += W) {
        B acc(start);
        for (std::size_t ky = 0; ky < p.kernel_h; ++ky) {
          const float* row = top + ky * p.dilation_h * pw + ox;
          for (std::size_t kx = 0; kx < p.kernel_w; ++kx) {
            acc = detail::gemm_madd<Arch>(B(wc[ky * p.kernel_w + kx]),
                                          B::load_unaligned(row + kx * p.dilation_w), acc);
          }
        }
        acc.store_unaligned(yrow + ox);
      }
      detail::depthwise_row_tail<fused>(p, scratch, wc, start, oy, ox, yrow);
    }
  }
}

namespace detail {

/// Channels [cb, cb + lanes) of sample plane group `x` (planes of in_h x in_w) and of `dy`
/// (planes of out_h x out_w), one channel per lane: xt[(padded position)·W + lane] with zeros in
/// the padding and the unused lanes, dt[(output position)·W + lane]. Four channels at a time
/// through gemm_pack_transposed (a value per store cost a fifth of a depthwise iteration); only
/// the padding is zeroed when every lane is used.
template <class Arch>
void depthwise_interleave(const depthwise_problem& p, const float* x, const float* dy,
                          std::size_t lanes, float* xt, float* dt) noexcept {
  constexpr std::size_t W = fbatch<Arch>::size;
  const std::size_t pw = p.padded_w(), plane = p.in_h * p.in_w, out_plane = p.out_h * p.out_w;
  if (lanes < W) {
    std::fill(xt, xt + p.padded_h() * pw * W, 0.0f);
  } else {
    std::fill(xt, xt + p.pad_h * pw * W, 0.0f);
    for (std::size_t y = 0; y < p.in_h; ++y) {
      float* row = xt + (p.pad_h + y) * pw * W;
      std::fill(row, row + p.pad_w * W, 0.0f);
      std::fill(row + (p.pad_w + p.in_w) * W, row + pw * W, 0.0f);
    }
    std::fill(xt + (p.pad_h + p.in_h) * pw * W, xt + p.padded_h() * pw * W, 0.0f);
  }
  for (std::size_t l = 0; l < lanes; l += 4) {
    const std::size_t rows = std::min<std::size_t>(4, lanes - l);
    for (std::size_t y = 0; y < p.in_h; ++y) {
      gemm_pack_transposed<Arch>(x, plane, l, rows, y * p.in_w, p.in_w,
                                 xt + ((p.pad_h + y) * pw + p.pad_w) * W + l, W);
    }
    gemm_pack_transposed<Arch>(dy, out_plane, l, rows, 0, out_plane, dt + l, W);
  }
  if (lanes < W) {  // the lanes past the last group of four
    for (std::size_t i = 0; i < out_plane; ++i)
      std::fill(dt + i * W + (lanes + 3) / 4 * 4, dt + (i + 1) * W, 0.0f);
  }
}

/// Taps of the SIMD weight gradient summed side by side (a 3x3 kernel in one pass).
inline constexpr std::size_t depthwise_simd_taps = 9;

}  // namespace detail

/// The weight gradient of Arch: the same sums as gemm_simd<Arch> over the im2col, bit for bit.
/// One channel per lane, so each lane's sum runs over the samples and positions in the
/// reference's order.
template <class Arch>
void depthwise_weight_grad_arch(const depthwise_problem& p, const float* x, const float* dy,
                                std::size_t n, std::size_t c0, std::size_t c1, float* dw,
                                float* scratch) noexcept {
  using B = detail::fbatch<Arch>;
  constexpr std::size_t W = B::size, G = detail::depthwise_simd_taps;
  const std::size_t taps = p.kernel_h * p.kernel_w, pw = p.padded_w();
  const std::size_t plane = p.in_h * p.in_w, out_plane = p.out_h * p.out_w;
  float* xt = scratch;
  float* dt = scratch + p.padded_h() * pw * W;
  for (std::size_t cb = c0; cb < c1; cb += W) {
    const std::size_t lanes = std::min(W, c1 - cb);
    for (std::size_t t0 = 0; t0 < taps; t0 += G) {
      const std::size_t nt = std::min(G, taps - t0);
      std::size_t offset[G] = {};  // of each tap from its window's corner, in positions
      for (std::size_t t = 0; t < nt; ++t) {
        const std::size_t ky = (t0 + t) / p.kernel_w, kx = (t0 + t) % p.kernel_w;
        offset[t] = ky * p.dilation_h * pw + kx * p.dilation_w;
      }
      B acc[G];
      for (auto& a : acc)
        a = B(0.0f);
      for (std::size_t s = 0; s < n; ++s) {
        detail::depthwise_interleave<Arch>(p, x + (s * p.channels + cb) * plane,
                                           dy + (s * p.channels + cb) * out_plane, lanes, xt, dt);
        for (std::size_t oy = 0; oy < p.out_h; ++oy) {
          for (std::size_t ox = 0; ox < p.out_w; ++ox) {
            const B d = B::load_unaligned(dt + (oy * p.out_w + ox) * W);
            const float* at = xt + (oy * p.stride_h * pw + ox * p.stride_w) * W;
            for (std::size_t t = 0; t < G; ++t) {
              if (t < nt)
                acc[t] = detail::gemm_madd<Arch>(d, B::load_unaligned(at + offset[t] * W), acc[t]);
            }
          }
        }
      }
      alignas(Arch::alignment()) float lane[W];
      for (std::size_t t = 0; t < nt; ++t) {
        acc[t].store_aligned(lane);
        for (std::size_t l = 0; l < lanes; ++l)
          dw[(cb + l) * taps + t0 + t] = lane[l];
      }
    }
  }
}

}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
