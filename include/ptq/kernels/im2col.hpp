// im2col and its adjoint col2im: the sliding-window gathers that turn a 2-D convolution into a
// GEMM. Conv2d's forward and weight gradient gather the input; ConvTranspose2d's forward
// scatters with col2im and its weight gradient gathers the output gradient (the transpose is the
// adjoint of a convolution whose input is the transpose's output).
//
// im2col is a copy, so every kernel set writes the same bits; the SIMD one (in kernel_set)
// copies each row run in whole vectors, the last one overlapping the one before, and writes the
// padding's zeros the same way. Compiled for the baseline, with a call per run and per zero
// fill, it was 15 % of a Conv2d AdaRound iteration (docs/ada.md, Speed).
// Depends on: core.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ptq/core/abi.hpp"
#include "ptq/kernels/simd_support.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace kernels {

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

namespace detail {

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

/// dst[0, n) = src[0, n), n >= C, in chunks of C floats, the last chunk ending at n and
/// overlapping the one before, so a run of any length takes whole chunks only. C = the arch's
/// vector (a batch of Arch) or 8 or 4 (fixed-size memcpy: one move each). Runs of up to two
/// chunks take no loop: g++ turns a copy loop into a call to memcpy, which costs more than the
/// copy of a 16-float image row (it made this gather 3x slower than its stores alone).
template <class Arch, std::size_t C>
inline void copy_chunks(float* dst, const float* src, std::size_t n) noexcept {
  const auto chunk = [&](std::size_t i) {
    if constexpr (C == fbatch<Arch>::size) {
      fbatch<Arch>::load_unaligned(src + i).store_unaligned(dst + i);
    } else {
      std::memcpy(dst + i, src + i, C * sizeof(float));
    }
  };
  if (n <= 2 * C) {
    chunk(0);
    if (n > C)
      chunk(n - C);
    return;
  }
  std::size_t i = 0;
  for (; i + C <= n; i += C)
    chunk(i);
  if (i < n)
    chunk(n - C);
}

/// dst[0, n) = src[0, n) with the widest chunk of at most the arch's vector that fits n.
template <class Arch>
inline void copy_run(float* dst, const float* src, std::size_t n) noexcept {
  constexpr std::size_t W = fbatch<Arch>::size;
  if (n >= W) {
    copy_chunks<Arch, W>(dst, src, n);
  } else if (W > 8 && n >= 8) {
    copy_chunks<Arch, 8>(dst, src, n);
  } else if (W > 4 && n >= 4) {
    copy_chunks<Arch, 4>(dst, src, n);
  } else {
    for (std::size_t i = 0; i < n; ++i)
      dst[i] = src[i];
  }
}

/// The part of the zero-padded image the windows read: rows and columns from -pad to the last
/// tap of the last window, so every window lies inside it.
[[nodiscard]] inline std::size_t window_extent(std::size_t out, std::size_t stride,
                                               std::size_t kernel, std::size_t dilation) noexcept {
  return out == 0 ? 0 : (out - 1) * stride + (kernel - 1) * dilation + 1;
}

/// The rows x cols of the zero-padded plane im2col_simd reads, and whether that is the image
/// itself (no padding, and every window inside the image).
struct padded_plane {
  std::size_t rows = 0;
  std::size_t cols = 0;
  bool is_image = false;
};
[[nodiscard]] inline padded_plane padded_plane_of(const window_geometry& g) noexcept {
  padded_plane p;
  p.rows = window_extent(g.out_h, g.stride_h, g.kernel_h, g.dilation_h);
  p.cols = window_extent(g.out_w, g.stride_w, g.kernel_w, g.dilation_w);
  p.is_image = g.pad_h == 0 && g.pad_w == 0 && p.rows <= g.img_h && p.cols <= g.img_w;
  return p;
}

}  // namespace detail

/// Floats of scratch im2col_simd needs: one zero-padded channel plane (none when the windows read
/// the image itself).
[[nodiscard]] inline std::size_t im2col_scratch_floats(const window_geometry& g) noexcept {
  const detail::padded_plane p = detail::padded_plane_of(g);
  return p.is_image ? 0 : p.rows * p.cols;
}

/// Gathers the windows of `img` ([channels, img_h, img_w], contiguous) into col:
/// col[((c*kernel_h + ky)*kernel_w + kx)*ldcol + oy*out_w + ox] = the pixel tap (ky, kx) of
/// position (oy, ox) reads, 0 outside the image. ldcol >= out_h*out_w lets several samples
/// share one col matrix side by side. The reference: one float at a time, the padding found per
/// row; it needs no scratch.
inline void im2col_ref(const window_geometry& g, const float* img, float* col, std::size_t ldcol,
                       float* /*scratch*/) noexcept {
  const std::size_t plane = g.img_h * g.img_w;
  for (std::size_t c = 0; c < g.channels; ++c) {
    const float* src = img + c * plane;
    for (std::size_t ky = 0; ky < g.kernel_h; ++ky) {
      const std::int64_t offy = detail::tap_offset(ky, g.dilation_h, g.pad_h);
      for (std::size_t kx = 0; kx < g.kernel_w; ++kx) {
        const std::int64_t offx = detail::tap_offset(kx, g.dilation_w, g.pad_w);
        float* dst = col + ((c * g.kernel_h + ky) * g.kernel_w + kx) * ldcol;
        for (std::size_t oy = 0; oy < g.out_h; ++oy) {
          const std::int64_t y = static_cast<std::int64_t>(oy * g.stride_h) + offy;
          for (std::size_t ox = 0; ox < g.out_w; ++ox) {
            const std::int64_t x = static_cast<std::int64_t>(ox * g.stride_w) + offx;
            const bool inside = y >= 0 && x >= 0 && y < static_cast<std::int64_t>(g.img_h) &&
                                x < static_cast<std::int64_t>(g.img_w);
            dst[oy * g.out_w + ox] =
                inside ? src[static_cast<std::size_t>(y) * g.img_w + static_cast<std::size_t>(x)]
                       : 0.0f;
          }
        }
      }
    }
  }
}

/// im2col_ref in whole vectors of Arch, the same bits. Unless the windows lie inside the image,
/// each channel is first copied into a zero-padded plane in `scratch` (im2col_scratch_floats
/// floats), so that every row of col is one straight run of the plane (for stride 1), with no
/// bounds to find per row.
template <class Arch>
void im2col_simd(const window_geometry& g, const float* img, float* col, std::size_t ldcol,
                 float* scratch) noexcept {
  const detail::padded_plane pp = detail::padded_plane_of(g);
  const std::size_t pitch = pp.is_image ? g.img_w : pp.cols;
  const std::size_t plane = g.img_h * g.img_w;
  // The image rows and columns inside the plane, at plane position + pad.
  const std::size_t rows = std::min(g.img_h, pp.rows > g.pad_h ? pp.rows - g.pad_h : 0);
  const std::size_t cols = std::min(g.img_w, pp.cols > g.pad_w ? pp.cols - g.pad_w : 0);
  if (!pp.is_image)
    std::fill(scratch, scratch + pp.rows * pp.cols, 0.0f);
  for (std::size_t c = 0; c < g.channels; ++c) {
    const float* src = img + c * plane;
    if (!pp.is_image) {
      for (std::size_t y = 0; y < rows; ++y)
        detail::copy_run<Arch>(scratch + (y + g.pad_h) * pitch + g.pad_w, src + y * g.img_w, cols);
      src = scratch;
    }
    for (std::size_t ky = 0; ky < g.kernel_h; ++ky) {
      for (std::size_t kx = 0; kx < g.kernel_w; ++kx) {
        float* dst = col + ((c * g.kernel_h + ky) * g.kernel_w + kx) * ldcol;
        const float* row = src + ky * g.dilation_h * pitch + kx * g.dilation_w;
        for (std::size_t oy = 0; oy < g.out_h; ++oy) {
          if (g.stride_w == 1) {
            detail::copy_run<Arch>(dst, row, g.out_w);
          } else {
            for (std::size_t ox = 0; ox < g.out_w; ++ox)
              dst[ox] = row[ox * g.stride_w];
          }
          dst += g.out_w;
          row += g.stride_h * pitch;
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

}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
