// The sliding windows of a 2-D convolution as a GEMM operand, read where they lie instead of
// copied out by an im2col first (an implicit GEMM): the geometry, the zero-padded planes the
// windows are read from, and the packing of B straight from those planes. Packing B is a copy
// whatever its source, so the products and their order are those of the GEMM over the explicit
// im2col, bit for bit; what goes is the im2col matrix itself, 9x the input for a 3x3 kernel,
// written and read back once per GEMM (docs/ada.md, Speed).
// Depends on: core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ptq/core/abi.hpp"
#include "ptq/kernels/fast_math.hpp"
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

/// The extent of one axis of the zero-padded image the windows read: from -pad to the last tap
/// of the last window.
[[nodiscard]] inline std::size_t window_extent(std::size_t out, std::size_t stride,
                                               std::size_t kernel, std::size_t dilation) noexcept {
  return out == 0 ? 0 : (out - 1) * stride + (kernel - 1) * dilation + 1;
}

/// dst[0, n) = src[0, n), n >= C, in chunks of C floats, the last chunk ending at n and
/// overlapping the one before, so a run of any length takes whole chunks only. C = the arch's
/// vector (a batch of Arch) or 8 or 4 (fixed-size memcpy: one move each). Runs of up to two
/// chunks take no loop: g++ turns a copy loop into a call to memcpy, which costs more than the
/// copy of a 16-float image row.
/// With src null, the chunks are zeros (the same without a memset call per padding cell).
template <class Arch, std::size_t C>
PTQ_ALWAYS_INLINE void copy_chunks(float* dst, const float* src, std::size_t n) noexcept {
  const auto chunk = [&](std::size_t i) {
    if constexpr (C == fbatch<Arch>::size) {
      (src != nullptr ? fbatch<Arch>::load_unaligned(src + i) : fbatch<Arch>(0.0f))
          .store_unaligned(dst + i);
    } else {
      float v[C] = {};
      if (src != nullptr)
        std::memcpy(v, src + i, sizeof v);
      std::memcpy(dst + i, v, sizeof v);
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

/// dst[0, n) = src[0, n) (zeros when src is null) with the widest chunk of at most the arch's
/// vector that fits n.
template <class Arch>
PTQ_ALWAYS_INLINE void copy_run(float* dst, const float* src, std::size_t n) noexcept {
  constexpr std::size_t W = fbatch<Arch>::size;
  if (n >= W) {
    copy_chunks<Arch, W>(dst, src, n);
  } else if (W > 8 && n >= 8) {
    copy_chunks<Arch, 8>(dst, src, n);
  } else if (W > 4 && n >= 4) {
    copy_chunks<Arch, 4>(dst, src, n);
  } else {
    for (std::size_t i = 0; i < n; ++i)
      dst[i] = src != nullptr ? src[i] : 0.0f;
  }
}

}  // namespace detail

/// The zero-padded plane the windows of one channel read: rows x cols, the image at (pad_h,
/// pad_w), zeros around it, reaching the last tap of the last window (so no window needs a
/// bounds check).
struct padded_plane {
  std::size_t rows = 0;
  std::size_t cols = 0;
};
[[nodiscard]] inline padded_plane padded_plane_of(const window_geometry& g) noexcept {
  return {detail::window_extent(g.out_h, g.stride_h, g.kernel_h, g.dilation_h),
          detail::window_extent(g.out_w, g.stride_w, g.kernel_w, g.dilation_w)};
}

/// Floats of one sample's padded planes (every channel): what pad_windows writes.
[[nodiscard]] inline std::size_t padded_sample_floats(const window_geometry& g) noexcept {
  const padded_plane p = padded_plane_of(g);
  return p.rows * p.cols * g.channels;
}

/// B of a GEMM read from windows (gemm_problem::b_windows), over `samples` images whose padded
/// planes (pad_windows, in the layout `pixel_major` says) lie one after the other at `planes`
/// (or, with `sample_of`, sample s of the GEMM is the planes' sample sample_of[s]: a minibatch
/// read from planes laid out once for all the samples):
///   - columns (pixel_major false): B(q, j) = the value tap (ky, kx) of channel c reads at window
///     position p of sample s, for q = (c*kernel_h + ky)*kernel_w + kx and j = s*P + p (P =
///     out_h*out_w, p = oy*out_w + ox): im2col's matrix, samples side by side;
///   - rows (pixel_major true): B(q, j) = the same value for q = s*P + p and j = (ky*kernel_w +
///     kx)*channels + c: the windows as rows, taps major.
/// Columns start at j0 (a tile of the GEMM's columns).
struct gemm_windows {
  window_geometry g;
  const float* planes = nullptr;
  std::size_t samples = 1;
  const std::size_t* sample_of = nullptr;
  bool pixel_major = false;
  std::size_t j0 = 0;
};

namespace detail {

/// Where B(q, j) of a gemm_windows lies in its planes: row_offset(q) + column_offset(j).
/// Windows as columns: q picks the channel and tap, j the sample and position; as rows the
/// other way around.
struct window_index {
  std::size_t taps_w = 1, taps = 1, positions = 1, out_w = 1;
  std::size_t plane_rows = 0, plane_cols = 0, sample_floats = 0, channels = 1;
  std::size_t columns = 0;  // of B
  const gemm_windows* w = nullptr;

  explicit window_index(const gemm_windows& win) noexcept : w(&win) {
    const padded_plane pp = padded_plane_of(win.g);
    taps_w = win.g.kernel_w;
    taps = win.g.kernel_h * win.g.kernel_w;
    positions = win.g.out_h * win.g.out_w;
    out_w = win.g.out_w;
    plane_rows = pp.rows;
    plane_cols = pp.cols;
    channels = win.g.channels;
    sample_floats = padded_sample_floats(win.g);
    columns = win.pixel_major ? taps * channels : win.samples * positions;
  }
  /// Offset of tap t = ky*kernel_w + kx from a window's corner, in plane elements.
  [[nodiscard]] std::size_t tap(std::size_t t) const noexcept {
    const std::size_t ky = t / taps_w, kx = t % taps_w;
    return ky * w->g.dilation_h * plane_cols + kx * w->g.dilation_w;
  }
  /// Offset of sample s's planes.
  [[nodiscard]] std::size_t sample(std::size_t s) const noexcept {
    return (w->sample_of != nullptr ? w->sample_of[s] : s) * sample_floats;
  }
  /// Offset of window position p of sample s (its corner), in plane elements.
  [[nodiscard]] std::size_t corner(std::size_t s, std::size_t p) const noexcept {
    const std::size_t oy = p / out_w, ox = p % out_w;
    const std::size_t at = oy * w->g.stride_h * plane_cols + ox * w->g.stride_w;
    return sample(s) + (w->pixel_major ? at * channels : at);
  }
  /// Offset of (channel c, tap t).
  [[nodiscard]] std::size_t channel_tap(std::size_t c, std::size_t t) const noexcept {
    return w->pixel_major ? tap(t) * channels + c : c * plane_rows * plane_cols + tap(t);
  }
  [[nodiscard]] std::size_t row_offset(std::size_t q) const noexcept {
    return w->pixel_major ? corner(q / positions, q % positions) : channel_tap(q / taps, q % taps);
  }
  [[nodiscard]] std::size_t column_offset(std::size_t j) const noexcept {
    return w->pixel_major ? channel_tap(j % channels, j / channels)
                          : corner(j / positions, j % positions);
  }
  /// Offsets of rows q, q+1, ...: three counters (channel, ky, kx; or sample, oy, ox) and their
  /// strides, stepped without a division; a sample's offset is looked up (window_index::sample).
  struct row_cursor {
    std::size_t idx[3] = {};
    std::size_t extent[3] = {};
    std::size_t stride[3] = {};
    std::size_t offset = 0;                 // of the counters with a stride
    const window_index* samples = nullptr;  // counter 0 is a sample (rows pixel-major)
    [[nodiscard]] std::size_t at() const noexcept {
      return samples != nullptr ? samples->sample(idx[0]) + offset : offset;
    }
    void next() noexcept {
      for (std::size_t l = 3; l-- > 0;) {
        offset += stride[l];
        if (++idx[l] < extent[l] || l == 0)
          return;
        offset -= extent[l] * stride[l];
        idx[l] = 0;
      }
    }
  };
  [[nodiscard]] row_cursor rows_from(std::size_t q) const noexcept {
    const window_geometry& g = w->g;
    row_cursor r;
    if (w->pixel_major) {
      r.samples = this;
      r.extent[0] = w->samples;
      r.extent[1] = g.out_h;
      r.extent[2] = g.out_w;
      r.stride[1] = g.stride_h * plane_cols * channels;
      r.stride[2] = g.stride_w * channels;
    } else {
      r.extent[0] = channels;
      r.extent[1] = g.kernel_h;
      r.extent[2] = g.kernel_w;
      r.stride[0] = plane_rows * plane_cols;
      r.stride[1] = g.dilation_h * plane_cols;
      r.stride[2] = g.dilation_w;
    }
    r.idx[2] = q % r.extent[2];
    r.idx[1] = q / r.extent[2] % r.extent[1];
    r.idx[0] = q / r.extent[2] / r.extent[1];
    r.offset = r.idx[0] * r.stride[0] + r.idx[1] * r.stride[1] + r.idx[2] * r.stride[2];
    return r;
  }
  /// Whether columns [j, j+len) are neighbours in the planes. Within one sample (window
  /// positions) or one row (taps x channels), offsets rise strictly with j, so that holds when
  /// the last is len - 1 past the first.
  [[nodiscard]] bool neighbours(std::size_t j, std::size_t len) const noexcept {
    if (!w->pixel_major && j / positions != (j + len - 1) / positions)
      return false;
    return column_offset(j + len - 1) - column_offset(j) == len - 1;
  }
  /// The step between columns j and j+1 when they are neighbours in the planes (0 if not).
  [[nodiscard]] std::size_t column_step(std::size_t j) const noexcept {
    if (j + 1 >= columns)  // no column after the last (and no sample after the last to look up)
      return 0;
    const std::size_t a = column_offset(j), b = column_offset(j + 1);
    if (w->pixel_major)
      return b == a + 1 ? 1 : 0;
    return b > a && b - a == w->g.stride_w ? w->g.stride_w : 0;
  }
};

/// Whether a GEMM can read the block k [p0, p0+kb) x columns [j0, j0+nb) of a gemm_windows B
/// where it lies instead of packing it: the block is whole NR-column slivers and each of its
/// W-column vectors is W neighbours in the planes (a row of window positions, or channels of one
/// tap). Then B(p0+q, j0+v*W+i) = planes[row_offset[q] + col_offset[v] + i] for i < W, with
/// row_offset[kb] and col_offset[nb/W] filled here.
template <std::size_t W, std::size_t NR>
[[nodiscard]] bool windows_in_place(const gemm_windows& w, std::size_t j0, std::size_t nb,
                                    std::size_t p0, std::size_t kb, std::size_t* row_offset,
                                    std::size_t* col_offset) noexcept {
  if (nb % NR != 0)
    return false;
  const window_index ix(w);
  for (std::size_t v = 0; v < nb / W; ++v) {
    const std::size_t j = w.j0 + j0 + v * W;
    if (!ix.neighbours(j, W))
      return false;
    col_offset[v] = ix.column_offset(j);
  }
  window_index::row_cursor cursor = ix.rows_from(p0);
  for (std::size_t q = 0; q < kb; ++q, cursor.next())
    row_offset[q] = cursor.at();
  return true;
}

/// Packs k [p0, p0+kb) x columns [j0, j0+nb) of a gemm_windows B as NR-column slivers (columns
/// past nb zero), like gemm_pack_b. Each sliver's columns split into runs that are neighbours in
/// the planes (a row of window positions, or a kernel row of taps x channels), and each run is
/// copied down the kb rows from their offsets (found once per call, without a division per row):
/// one or two vector copies a row for the AdaRound shapes.
template <class Arch, std::size_t NR>
void gemm_pack_b_windows(const gemm_windows& w, std::size_t j0, std::size_t nb, std::size_t p0,
                         std::size_t kb, float* out) noexcept {
  constexpr std::size_t W = fbatch<Arch>::size;
  const window_index ix(w);
  constexpr std::size_t rows_per_block = 256;  // gemm_kc: one block for the GEMM's calls
  std::size_t row_offset[rows_per_block];
  for (std::size_t q0 = 0; q0 < kb; q0 += rows_per_block) {
    const std::size_t rows = kb - q0 < rows_per_block ? kb - q0 : rows_per_block;
    window_index::row_cursor cursor = ix.rows_from(p0 + q0);
    for (std::size_t q = 0; q < rows; ++q, cursor.next())
      row_offset[q] = cursor.at();
    float* sliver = out + q0 * NR;
    for (std::size_t s = 0; s < nb; s += NR, sliver += kb * NR) {
      const std::size_t cols = nb - s < NR ? nb - s : NR;
      for (std::size_t jj = 0; jj < cols;) {
        const std::size_t j = w.j0 + j0 + s + jj;
        const std::size_t src = ix.column_offset(j), step = ix.column_step(j);
        std::size_t len = 1;
        if (step != 0) {
          while (jj + len < cols && ix.column_step(j + len - 1) == step)
            ++len;
        }
        const float* base = w.planes + src;
        float* dst = sliver + jj;
        if (step == 1 && len == W) {  // the common runs: one vector a row
          for (std::size_t q = 0; q < rows; ++q)
            fbatch<Arch>::load_unaligned(base + row_offset[q]).store_unaligned(dst + q * NR);
        } else if (step == 1) {
          for (std::size_t q = 0; q < rows; ++q)
            copy_run<Arch>(dst + q * NR, base + row_offset[q], len);
        } else {
          for (std::size_t q = 0; q < rows; ++q) {
            for (std::size_t i = 0; i < len; ++i)
              dst[q * NR + i] = base[row_offset[q] + i * step];
          }
        }
        jj += len;
      }
      if (cols < NR) {
        for (std::size_t q = 0; q < rows; ++q)
          copy_run<Arch>(sliver + q * NR + cols, nullptr, NR - cols);
      }
    }
  }
}

}  // namespace detail
}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
