// im2col and its adjoint col2im, and the zero-padded planes an implicit GEMM reads windows from
// (windows.hpp). Conv2d's forward and weight gradient read the input's windows; ConvTranspose2d's
// forward scatters with col2im and its weight gradient reads the output gradient's windows (the
// transpose is the adjoint of a convolution whose input is the transpose's output). im2col_ref is
// the definition the windows' GEMM operand equals (tests/kernels/test_im2col.cpp).
// Depends on: core.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "ptq/core/abi.hpp"
#include "ptq/kernels/gemm.hpp"
#include "ptq/kernels/windows.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace kernels {

/// Gathers the windows of `img` ([channels, img_h, img_w], contiguous) into col:
/// col[((c*kernel_h + ky)*kernel_w + kx)*ldcol + oy*out_w + ox] = the pixel tap (ky, kx) of
/// position (oy, ox) reads, 0 outside the image. ldcol >= out_h*out_w lets several samples
/// share one col matrix side by side.
inline void im2col_ref(const window_geometry& g, const float* img, float* col,
                       std::size_t ldcol) noexcept {
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

/// One sample's zero-padded planes (padded_plane_of) from `img` ([channels, img_h, img_w]):
/// channel-major (out[(c*rows + y)*cols + x]) or pixel-major (out[(y*cols + x)*channels + c]),
/// padded_sample_floats floats. The reference: one value at a time.
inline void pad_windows_ref(const window_geometry& g, bool pixel_major, const float* img,
                            float* out) noexcept {
  const padded_plane pp = padded_plane_of(g);
  const std::size_t C = g.channels;
  for (std::size_t c = 0; c < C; ++c) {
    for (std::size_t y = 0; y < pp.rows; ++y) {
      for (std::size_t x = 0; x < pp.cols; ++x) {
        const bool inside =
            y >= g.pad_h && x >= g.pad_w && y - g.pad_h < g.img_h && x - g.pad_w < g.img_w;
        const float v = inside ? img[(c * g.img_h + y - g.pad_h) * g.img_w + x - g.pad_w] : 0.0f;
        out[pixel_major ? (y * pp.cols + x) * C + c : (c * pp.rows + y) * pp.cols + x] = v;
      }
    }
  }
}

/// pad_windows_ref in whole vectors of Arch, the same bits: each value written once, zeros above
/// and below the image and beside each image row (vector stores: a memset call per one-float
/// border cost more than the row), the image rows copied (channel-major) or transposed four
/// channels at a time (pixel-major).
template <class Arch>
void pad_windows_simd(const window_geometry& g, bool pixel_major, const float* img,
                      float* out) noexcept {
  const padded_plane pp = padded_plane_of(g);
  const std::size_t C = g.channels, plane = g.img_h * g.img_w;
  // The image rows and columns inside the plane (the last windows may stop short of the image).
  const std::size_t rows = std::min(g.img_h, pp.rows > g.pad_h ? pp.rows - g.pad_h : 0);
  const std::size_t cols = std::min(g.img_w, pp.cols > g.pad_w ? pp.cols - g.pad_w : 0);
  const std::size_t left = std::min(g.pad_w, pp.cols);  // the padding the windows reach
  const std::size_t per = pixel_major ? C : 1;          // floats per pixel of one plane row
  const std::size_t planes = pixel_major ? 1 : C;
  for (std::size_t c = 0; c < planes; ++c) {
    for (std::size_t y = 0; y < pp.rows; ++y) {
      float* row = out + (c * pp.rows + y) * pp.cols * per;
      if (y < g.pad_h || y - g.pad_h >= rows) {
        detail::copy_run<Arch>(row, nullptr, pp.cols * per);
        continue;
      }
      const std::size_t iy = y - g.pad_h;
      detail::copy_run<Arch>(row, nullptr, left * per);
      float* px = row + left * per;
      if (!pixel_major) {
        detail::copy_run<Arch>(px, img + c * plane + iy * g.img_w, cols);
      } else {
        std::size_t ch = 0;
        for (; ch + 4 <= C; ch += 4)
          detail::gemm_pack_transposed<Arch>(img, plane, ch, 4, iy * g.img_w, cols, px + ch, C);
        for (; ch < C; ++ch) {
          for (std::size_t x = 0; x < cols; ++x)
            px[x * C + ch] = img[ch * plane + iy * g.img_w + x];
        }
      }
      detail::copy_run<Arch>(px + cols * per, nullptr, (pp.cols - left - cols) * per);
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
