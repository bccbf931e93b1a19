// im2col and its adjoint col2im: the sliding-window gathers that turn a 2-D convolution into a
// GEMM. Conv2d's forward and weight gradient gather the input; ConvTranspose2d's forward
// scatters with col2im and its weight gradient gathers the output gradient (the transpose is the
// adjoint of a convolution whose input is the transpose's output).
// Depends on: core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

/// A sliding window over an image of `channels` x img_h x img_w: window position (oy, ox) of the
/// out_h x out_w grid and kernel tap (ky, kx) read pixel (oy*stride_h - pad_h + ky*dilation_h,
/// ox*stride_w - pad_w + kx*dilation_w); pixels outside the image are zero.
struct window_geometry {
  std::size_t channels = 0;
  std::size_t img_h = 0;
  std::size_t img_w = 0;
  std::size_t kernel_h = 1;
  std::size_t kernel_w = 1;
  std::size_t stride_h = 1;
  std::size_t stride_w = 1;
  std::size_t pad_h = 0;
  std::size_t pad_w = 0;
  std::size_t dilation_h = 1;
  std::size_t dilation_w = 1;
  std::size_t out_h = 0;
  std::size_t out_w = 0;
};

/// The window positions [lo, hi) of one axis whose tap at offset `off` (= k*dilation - pad) lands
/// inside [0, extent): o*stride + off in [0, extent).
struct tap_range {
  std::size_t lo = 0;
  std::size_t hi = 0;
};
[[nodiscard]] inline tap_range valid_positions(std::int64_t off, std::size_t stride,
                                               std::size_t extent, std::size_t out) noexcept {
  const auto s = static_cast<std::int64_t>(stride);
  const auto e = static_cast<std::int64_t>(extent);
  const auto n = static_cast<std::int64_t>(out);
  std::int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
  std::int64_t hi = e - off <= 0 ? 0 : (e - off + s - 1) / s;
  lo = lo < n ? lo : n;
  hi = hi < n ? hi : n;
  hi = hi > lo ? hi : lo;
  return {static_cast<std::size_t>(lo), static_cast<std::size_t>(hi)};
}

[[nodiscard]] inline std::int64_t tap_offset(std::size_t k, std::size_t dilation,
                                             std::size_t pad) noexcept {
  return static_cast<std::int64_t>(k * dilation) - static_cast<std::int64_t>(pad);
}

/// Pixel index o*stride + off of a position inside the tap range (never negative there).
[[nodiscard]] inline std::size_t tap_pixel(std::size_t o, std::size_t stride,
                                           std::int64_t off) noexcept {
  return static_cast<std::size_t>(static_cast<std::int64_t>(o * stride) + off);
}

/// dst[0, n) = src[0, n) for the short runs of an im2col row (16 floats of a 16x16 image): 16
/// bytes per inlined copy, then one float at a time. A loop the compiler could vectorize would
/// need to know that dst and src do not overlap, and a memcpy call per run cost more than the
/// copy (most of the 12 % of a Conv2d AdaRound iteration that memmove took).
inline void copy_run(float* dst, const float* src, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4)
    std::memcpy(dst + i, src + i, 4 * sizeof(float));
  for (; i < n; ++i)
    dst[i] = src[i];
}

/// Gathers the windows of `img` ([channels, img_h, img_w], contiguous) into col:
/// col[((c*kernel_h + ky)*kernel_w + kx)*ldcol + oy*out_w + ox] = the pixel tap (ky, kx) of
/// position (oy, ox) reads, 0 outside the image. ldcol >= out_h*out_w lets several samples
/// share one col matrix side by side.
inline void im2col(const window_geometry& g, const float* img, float* col,
                   std::size_t ldcol) noexcept {
  const std::size_t plane = g.img_h * g.img_w;
  for (std::size_t c = 0; c < g.channels; ++c) {
    const float* src = img + c * plane;
    for (std::size_t ky = 0; ky < g.kernel_h; ++ky) {
      const std::int64_t offy = detail::tap_offset(ky, g.dilation_h, g.pad_h);
      const auto ry = detail::valid_positions(offy, g.stride_h, g.img_h, g.out_h);
      for (std::size_t kx = 0; kx < g.kernel_w; ++kx) {
        const std::int64_t offx = detail::tap_offset(kx, g.dilation_w, g.pad_w);
        const auto rx = detail::valid_positions(offx, g.stride_w, g.img_w, g.out_w);
        float* dst = col + ((c * g.kernel_h + ky) * g.kernel_w + kx) * ldcol;
        for (std::size_t oy = 0; oy < g.out_h; ++oy) {
          float* d = dst + oy * g.out_w;
          if (oy < ry.lo || oy >= ry.hi) {
            for (std::size_t ox = 0; ox < g.out_w; ++ox)
              d[ox] = 0.0f;
            continue;
          }
          const float* row = src + detail::tap_pixel(oy, g.stride_h, offy) * g.img_w;
          for (std::size_t ox = 0; ox < rx.lo; ++ox)
            d[ox] = 0.0f;
          if (g.stride_w == 1) {
            copy_run(d + rx.lo, row + detail::tap_pixel(rx.lo, 1, offx), rx.hi - rx.lo);
          } else {
            for (std::size_t ox = rx.lo; ox < rx.hi; ++ox)
              d[ox] = row[detail::tap_pixel(ox, g.stride_w, offx)];
          }
          for (std::size_t ox = rx.hi; ox < g.out_w; ++ox)
            d[ox] = 0.0f;
        }
      }
    }
  }
}

/// The adjoint of im2col: img[pixel] += col[...] for every (c, ky, kx, oy, ox) whose tap lands
/// inside the image, in that loop order (so each pixel's sum has a fixed order). img is not
/// cleared first.
inline void col2im(const window_geometry& g, const float* col, std::size_t ldcol,
                   float* img) noexcept {
  const std::size_t plane = g.img_h * g.img_w;
  for (std::size_t c = 0; c < g.channels; ++c) {
    float* dst = img + c * plane;
    for (std::size_t ky = 0; ky < g.kernel_h; ++ky) {
      const std::int64_t offy = detail::tap_offset(ky, g.dilation_h, g.pad_h);
      const auto ry = detail::valid_positions(offy, g.stride_h, g.img_h, g.out_h);
      for (std::size_t kx = 0; kx < g.kernel_w; ++kx) {
        const std::int64_t offx = detail::tap_offset(kx, g.dilation_w, g.pad_w);
        const auto rx = detail::valid_positions(offx, g.stride_w, g.img_w, g.out_w);
        const float* src = col + ((c * g.kernel_h + ky) * g.kernel_w + kx) * ldcol;
        for (std::size_t oy = ry.lo; oy < ry.hi; ++oy) {
          const float* s = src + oy * g.out_w;
          float* row = dst + detail::tap_pixel(oy, g.stride_h, offy) * g.img_w;
          for (std::size_t ox = rx.lo; ox < rx.hi; ++ox)
            row[detail::tap_pixel(ox, g.stride_w, offx)] += s[ox];
        }
      }
    }
  }
}

}  // namespace detail

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
