// Single-precision GEMM for the layer arithmetic of AdaRound: C = A·B or C += A·B, row-major with
// leading dimensions, A and/or B optionally read transposed, or B read from a convolution's windows
// (windows.hpp: an implicit GEMM, with no im2col matrix). The scalar reference defines the
// result: every C element is accumulated over k in increasing order with one multiply-add per k,
// a fused multiply-add exactly when the arch has one (gemm_uses_fma<Arch>), mul then add
// otherwise. The cache-blocked SIMD kernel keeps that order (its k blocks store the running sum
// to C in float and reload it, which is what the reference's float accumulator holds), so it
// equals the reference bit for bit; compile with -ffp-contract=off so the compiler does not fuse
// the unfused path on its own.
// Depends on: core.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ptq/core/abi.hpp"
#include "ptq/kernels/simd_support.hpp"
#include "ptq/kernels/windows.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace kernels {

/// One GEMM: C[i][j] = (accumulate ? C[i][j] : 0) + sum_q A(i,q)·B(q,j) for i < m, j < n, q < k,
/// where A(i,q) = a[i*lda + q] (a[q*lda + i] if trans_a) and B(q,j) = b[q*ldb + j]
/// (b[j*ldb + q] if trans_b). C must not overlap A or B.
struct gemm_problem {
  std::size_t m = 0;
  std::size_t n = 0;
  std::size_t k = 0;
  const float* a = nullptr;
  std::size_t lda = 0;
  bool trans_a = false;
  const float* b = nullptr;
  std::size_t ldb = 0;
  bool trans_b = false;
  float* c = nullptr;
  std::size_t ldc = 0;
  bool accumulate = false;
  /// When set, B is read from these windows (windows.hpp) instead of b, ldb and trans_b.
  const gemm_windows* b_windows = nullptr;
};

/// Cache blocking of the SIMD kernel (the same on every arch): a kc x mc block of A stays in L2,
/// a kc x nr sliver of the kc x nc block of B in L1. gemm_nc is a multiple of every arch's nr.
inline constexpr std::size_t gemm_kc = 256;
inline constexpr std::size_t gemm_mc = 128;
inline constexpr std::size_t gemm_nc = 960;
/// Floats of packing workspace a gemm call needs (slack for aligning it to 64 bytes included).
inline constexpr std::size_t gemm_workspace_floats = gemm_kc * (gemm_mc + gemm_nc) + 16;

namespace detail {

/// One multiply-add of the reference: fused (one rounding) or a rounded product, then the sum.
template <bool Fused>
[[nodiscard]] inline float ref_madd(float x, float y, float acc) noexcept {
  if constexpr (Fused) {
    return std::fma(x, y, acc);
  } else {
    const float prod = x * y;
    return acc + prod;
  }
}

/// The scalar reference for one rounding mode. Each output is its own accumulator, summed in k
/// order; four outputs of a row are computed side by side and the transposes are strides, so
/// every translation unit compiles the same branch-free loop whichever inline copy the linker
/// keeps (the branchy loop was vectorized in some units and not in others, 2.5x apart). Four
/// independent sums are the same sums: nothing is reassociated.
/// b_at(q, j) = B(q, j).
template <bool Fused, class BAt>
inline void gemm_ref_loop(const gemm_problem& p, const BAt& b_at) noexcept {
  constexpr std::size_t w = 4;
  const std::size_t a_i = p.trans_a ? 1 : p.lda, a_q = p.trans_a ? p.lda : 1;
  for (std::size_t i = 0; i < p.m; ++i) {
    const float* a = p.a + i * a_i;
    float* c = p.c + i * p.ldc;
    std::size_t j = 0;
    for (; j + w <= p.n; j += w) {
      float acc[w];
      for (std::size_t t = 0; t < w; ++t)
        acc[t] = p.accumulate ? c[j + t] : 0.0f;
      for (std::size_t q = 0; q < p.k; ++q) {
        const float x = a[q * a_q];
        for (std::size_t t = 0; t < w; ++t)
          acc[t] = ref_madd<Fused>(x, b_at(q, j + t), acc[t]);
      }
      for (std::size_t t = 0; t < w; ++t)
        c[j + t] = acc[t];
    }
    for (; j < p.n; ++j) {
      float acc = p.accumulate ? c[j] : 0.0f;
      for (std::size_t q = 0; q < p.k; ++q)
        acc = ref_madd<Fused>(a[q * a_q], b_at(q, j), acc);
      c[j] = acc;
    }
  }
}

template <bool Fused>
inline void gemm_ref_any(const gemm_problem& p) noexcept {
  if (p.b_windows != nullptr) {
    const window_index ix(*p.b_windows);
    const float* planes = p.b_windows->planes;
    const std::size_t j0 = p.b_windows->j0;
    gemm_ref_loop<Fused>(p, [&](std::size_t q, std::size_t j) {
      return planes[ix.row_offset(q) + ix.column_offset(j0 + j)];
    });
    return;
  }
  const std::size_t b_q = p.trans_b ? 1 : p.ldb, b_j = p.trans_b ? p.ldb : 1;
  gemm_ref_loop<Fused>(p, [&](std::size_t q, std::size_t j) { return p.b[j * b_j + q * b_q]; });
}

}  // namespace detail

/// Scalar reference, with `fused` = whether each multiply-add is one rounding (std::fma).
inline void gemm_ref(const gemm_problem& p, bool fused) noexcept {
  if (fused) {
    detail::gemm_ref_any<true>(p);
  } else {
    detail::gemm_ref_any<false>(p);
  }
}

/// The references in kernel_set form (the workspace is unused).
inline void gemm_ref_unfused(const gemm_problem& p, float* /*workspace*/) {
  detail::gemm_ref_any<false>(p);
}
inline void gemm_ref_fused(const gemm_problem& p, float* /*workspace*/) {
  detail::gemm_ref_any<true>(p);
}

/// Whether the SIMD kernel of Arch uses a fused multiply-add (and so equals gemm_ref(p, true)):
/// the fma3 arches and avx512f. Every other arch (sse2, avx, fma4, neon) takes mul then add.
template <class Arch>
inline constexpr bool gemm_uses_fma = detail::has_fused_madd<Arch>;

namespace detail {

/// Register tile of the micro-kernel: gemm_mr<Arch> rows x gemm_nb<Arch> batches. 4 x 3 where
/// there are 16 vector registers (12 accumulators: 4 x 12 floats on SSE2, 4 x 24 on AVX2); 8 x 2
/// on AVX-512 (16 accumulators of 32 registers, 8 x 32 floats): a 32-float sliver divides the
/// AdaRound shapes (256 positions, 576 = 64 x 3 x 3 taps, 512 channels), where a 48-float one
/// left a partial sliver in every 256, and its kc x nr panel fits the 32 KiB L1.
template <class Arch>
inline constexpr std::size_t gemm_mr = fbatch<Arch>::size >= 16 ? 8 : 4;
template <class Arch>
inline constexpr std::size_t gemm_nb = fbatch<Arch>::size >= 16 ? 2 : 3;
template <class Arch>
inline constexpr std::size_t gemm_nr = std::size_t{gemm_nb<Arch>} * fbatch<Arch>::size;

template <class Arch>
[[nodiscard]] inline fbatch<Arch> gemm_madd(const fbatch<Arch>& x, const fbatch<Arch>& y,
                                            const fbatch<Arch>& acc) noexcept {
  if constexpr (gemm_uses_fma<Arch>) {
    return fused_madd<Arch>(x, y, acc);
  } else {
    const fbatch<Arch> prod = x * y;
    return acc + prod;
  }
}

/// out[q * ldo + t] = src[t * lds + q] for t < 4, q < W (the arch's vector width): four runs
/// of W values transposed in 4 x 4 blocks, one per 128-bit lane (the unpacks of every x86 arch
/// work lane by lane). Data movement only: the values are unchanged.
template <class Arch>
void gemm_transpose_4(const float* src, std::size_t lds, float* out, std::size_t ldo) noexcept {
  using B = fbatch<Arch>;
  using D = xsimd::batch<double, Arch>;
  constexpr std::size_t W = B::size;
  const B r0 = B::load_unaligned(src), r1 = B::load_unaligned(src + lds);
  const B r2 = B::load_unaligned(src + 2 * lds), r3 = B::load_unaligned(src + 3 * lds);
  // Lane L: t0 = r0[4L], r1[4L], r0[4L+1], r1[4L+1]; t1 the same for 4L+2, 4L+3.
  const D t0 = xsimd::bitwise_cast<D>(xsimd::zip_lo(r0, r1));
  const D t1 = xsimd::bitwise_cast<D>(xsimd::zip_hi(r0, r1));
  const D t2 = xsimd::bitwise_cast<D>(xsimd::zip_lo(r2, r3));
  const D t3 = xsimd::bitwise_cast<D>(xsimd::zip_hi(r2, r3));
  // Lane L of column m: r0..r3 at 4L + m.
  alignas(64) float col[4][W];
  xsimd::bitwise_cast<B>(xsimd::zip_lo(t0, t2)).store_aligned(col[0]);
  xsimd::bitwise_cast<B>(xsimd::zip_hi(t0, t2)).store_aligned(col[1]);
  xsimd::bitwise_cast<B>(xsimd::zip_lo(t1, t3)).store_aligned(col[2]);
  xsimd::bitwise_cast<B>(xsimd::zip_hi(t1, t3)).store_aligned(col[3]);
  for (std::size_t lane = 0; lane < W; lane += 4) {
    for (std::size_t m = 0; m < 4; ++m)
      std::memcpy(out + (lane + m) * ldo, &col[m][lane], 4 * sizeof(float));
  }
}

/// out[q * ldo + t] = x[(r0 + t) * ldx + p0 + q] for t < 4, q < kb: four rows of x from r0, of
/// which `rows` exist (the others are zero), read along k and written across. Whole vectors go
/// through gemm_transpose_4; the rest of k one value at a time.
template <class Arch>
void gemm_pack_transposed(const float* x, std::size_t ldx, std::size_t r0, std::size_t rows,
                          std::size_t p0, std::size_t kb, float* out, std::size_t ldo) noexcept {
  constexpr std::size_t W = fbatch<Arch>::size;
  std::size_t q = 0;
  if (rows >= 4) {
    for (const float* src = x + r0 * ldx + p0; q + W <= kb; q += W)
      gemm_transpose_4<Arch>(src + q, ldx, out + q * ldo, ldo);
  }
  for (; q < kb; ++q) {
    for (std::size_t t = 0; t < 4; ++t)
      out[q * ldo + t] = t < rows ? x[(r0 + t) * ldx + p0 + q] : 0.0f;
  }
}

/// Packs rows [i0, i0+mb) x k [p0, p0+kb) of A as MR-row slivers: sliver r holds, for each q,
/// the MR values A(i0+r*MR.., p0+q) (rows past mb are zero).
template <class Arch>
void gemm_pack_a(const gemm_problem& p, std::size_t i0, std::size_t mb, std::size_t p0,
                 std::size_t kb, float* out) noexcept {
  constexpr std::size_t MR = gemm_mr<Arch>;
  static_assert(MR % 4 == 0, "gemm_pack_a packs four rows at a time");
  for (std::size_t r = 0; r < mb; r += MR) {
    const std::size_t rows = mb - r < MR ? mb - r : MR;
    if (p.trans_a) {  // A(i, q) = a[q * lda + i]: the sliver's rows are contiguous
      for (std::size_t q = 0; q < kb; ++q) {
        for (std::size_t ii = 0; ii < MR; ++ii)
          out[q * MR + ii] = ii < rows ? p.a[(p0 + q) * p.lda + i0 + r + ii] : 0.0f;
      }
    } else {
      for (std::size_t ii = 0; ii < MR; ii += 4) {
        gemm_pack_transposed<Arch>(p.a, p.lda, i0 + r + ii, rows > ii ? rows - ii : 0, p0, kb,
                                   out + ii, MR);
      }
    }
    out += kb * MR;
  }
}

/// Packs k [p0, p0+kb) x columns [j0, j0+nb) of B as nr-column slivers (columns past nb zero).
/// out is aligned to the arch.
template <class Arch>
void gemm_pack_b(const gemm_problem& p, std::size_t j0, std::size_t nb, std::size_t p0,
                 std::size_t kb, float* out) noexcept {
  using B = fbatch<Arch>;
  constexpr std::size_t W = B::size, nr = gemm_nr<Arch>;
  for (std::size_t s = 0; s < nb; s += nr) {
    const std::size_t cols = nb - s < nr ? nb - s : nr;
    if (!p.trans_b && cols == nr) {
      // Full slivers of a row-major B: whole batches (with small m, packing B is a large part
      // of the work).
      for (std::size_t q = 0; q < kb; ++q) {
        const float* src = p.b + (p0 + q) * p.ldb + j0 + s;
        for (std::size_t v = 0; v < nr; v += W)
          B::load_unaligned(src + v).store_aligned(out + v);
        out += nr;
      }
    } else if (!p.trans_b) {
      for (std::size_t q = 0; q < kb; ++q) {
        const float* src = p.b + (p0 + q) * p.ldb + j0 + s;
        for (std::size_t jj = 0; jj < cols; ++jj)
          out[jj] = src[jj];
        for (std::size_t jj = cols; jj < nr; ++jj)
          out[jj] = 0.0f;
        out += nr;
      }
    } else {
      // Four columns at a time, transposed a vector of k at a time.
      for (std::size_t jj = 0; jj < nr; jj += 4) {
        gemm_pack_transposed<Arch>(p.b, p.ldb, j0 + s + jj, cols > jj ? cols - jj : 0, p0, kb,
                                   out + jj, nr);
      }
      out += kb * nr;
    }
  }
}

/// Where the micro-kernel reads B: row q of its sliver at row(q), vector v of the row at
/// column(v) past it. Packed: the slivers of gemm_pack_b; in place: a gemm_windows' planes
/// (windows_in_place), so that no packed copy is written and read back.
template <std::size_t W, std::size_t NB>
struct packed_b_rows {
  const float* sliver;
  [[nodiscard]] const float* row(std::size_t q) const noexcept { return sliver + q * NB * W; }
  [[nodiscard]] std::size_t column(std::size_t v) const noexcept { return v * W; }
};
template <std::size_t NB>
struct in_place_b_rows {
  const float* planes;
  const std::size_t* row_offset;  // of row q
  std::size_t col_offset[NB];     // of vector v
  [[nodiscard]] const float* row(std::size_t q) const noexcept { return planes + row_offset[q]; }
  [[nodiscard]] std::size_t column(std::size_t v) const noexcept { return col_offset[v]; }
};

/// The register-blocked micro-kernel: an MR x NB-batch tile of C (leading dimension ldc) from a
/// packed sliver of A and the rows of B, starting from C (load) or from zero. MR x NB
/// independent accumulator chains hide the multiply-add latency; per k: NB loads of B, MR
/// broadcasts of A, MR x NB multiply-adds. The loops over the tile are unrolled, so the
/// accumulators stay in registers.
template <class Arch, std::size_t MR, std::size_t NB, class BRows>
void gemm_micro(std::size_t kb, const float* ap, const BRows& b_rows, float* c, std::size_t ldc,
                bool load) noexcept {
  using B = fbatch<Arch>;
  constexpr std::size_t W = B::size;
  B acc[MR][NB];
#pragma GCC unroll 8
  for (std::size_t i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (std::size_t v = 0; v < NB; ++v)
      acc[i][v] = load ? B::load_unaligned(c + i * ldc + v * W) : B(0.0f);
  }
  std::size_t column[NB];
#pragma GCC unroll 4
  for (std::size_t v = 0; v < NB; ++v)
    column[v] = b_rows.column(v);
  for (std::size_t q = 0; q < kb; ++q) {
    const float* row = b_rows.row(q);
    B b[NB];
#pragma GCC unroll 4
    for (std::size_t v = 0; v < NB; ++v)
      b[v] = B::load_unaligned(row + column[v]);
#pragma GCC unroll 8
    for (std::size_t i = 0; i < MR; ++i) {
      const B a(ap[i]);
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NB; ++v)
        acc[i][v] = gemm_madd<Arch>(a, b[v], acc[i][v]);
    }
    ap += MR;
  }
#pragma GCC unroll 8
  for (std::size_t i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (std::size_t v = 0; v < NB; ++v)
      acc[i][v].store_unaligned(c + i * ldc + v * W);
  }
}

/// The tiles of one column sliver (its first `cols` columns) down the mb rows of a packed block
/// of A: whole tiles straight into C, partial ones through `edge` (mr x nr floats).
template <class Arch, class BRows>
void gemm_column_tiles(const float* apack, const BRows& b_rows, std::size_t mb, std::size_t kb,
                       std::size_t cols, float* c, std::size_t ldc, bool load,
                       float* edge) noexcept {
  constexpr std::size_t mr = gemm_mr<Arch>, vb = gemm_nb<Arch>, nr = gemm_nr<Arch>;
  for (std::size_t ir = 0; ir < mb; ir += mr) {
    const std::size_t rows = mb - ir < mr ? mb - ir : mr;
    const float* ap = apack + ir * kb;
    float* ct = c + ir * ldc;
    if (rows == mr && cols == nr) {
      gemm_micro<Arch, mr, vb>(kb, ap, b_rows, ct, ldc, load);
      continue;
    }
    if (load) {
      for (std::size_t ii = 0; ii < mr; ++ii) {
        for (std::size_t jj = 0; jj < nr; ++jj)
          edge[ii * nr + jj] = ii < rows && jj < cols ? ct[ii * ldc + jj] : 0.0f;
      }
    }
    gemm_micro<Arch, mr, vb>(kb, ap, b_rows, edge, nr, load);
    for (std::size_t ii = 0; ii < rows; ++ii) {
      for (std::size_t jj = 0; jj < cols; ++jj)
        ct[ii * ldc + jj] = edge[ii * nr + jj];
    }
  }
}

/// The first 64-byte aligned float at or after `p` (an offset from p: no integer-to-pointer
/// cast, which would hide the pointer's origin from the optimizer).
inline float* align64(const float* p) noexcept {
  const auto v = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t skip = (64 - (v & 63)) & 63;  // bytes, a multiple of sizeof(float)
  return const_cast<float*>(p) + skip / sizeof(float);
}

}  // namespace detail

/// The cache-blocked SIMD GEMM of Arch; equals gemm_ref(p, gemm_uses_fma<Arch>) bit for bit.
/// `workspace` holds gemm_workspace_floats floats (any alignment) for the packed panels; with
/// nullptr a per-thread buffer is used (allocated on a thread's first call).
template <class Arch>
void gemm_simd(const gemm_problem& p, float* workspace) {
  constexpr std::size_t mr = detail::gemm_mr<Arch>, vb = detail::gemm_nb<Arch>;
  constexpr std::size_t nr = detail::gemm_nr<Arch>, W = detail::fbatch<Arch>::size;
  constexpr std::size_t nc = gemm_nc / nr * nr;
  static_assert(nc == gemm_nc, "gemm_nc must be a multiple of every arch's nr");
  static_assert(gemm_mc % mr == 0, "gemm_mc must be a multiple of mr");
  if (p.m == 0 || p.n == 0)
    return;
  if (p.k == 0) {
    if (!p.accumulate) {
      for (std::size_t i = 0; i < p.m; ++i) {
        for (std::size_t j = 0; j < p.n; ++j)
          p.c[i * p.ldc + j] = 0.0f;
      }
    }
    return;
  }
  if (workspace == nullptr) {
    thread_local std::vector<float> own;
    own.resize(gemm_workspace_floats);
    workspace = own.data();
  }
  float* const apack = detail::align64(workspace);
  float* const bpack = apack + gemm_kc * gemm_mc;  // 64-byte aligned: gemm_kc*gemm_mc % 16 == 0
  alignas(64) float edge[mr * nr];                 // partial tiles go through this buffer

  // B in place (windows_in_place): the offsets of a block's rows and vectors.
  std::size_t row_offset[gemm_kc];
  std::size_t col_offset[gemm_nc];
  for (std::size_t jc = 0; jc < p.n; jc += nc) {
    const std::size_t nb = p.n - jc < nc ? p.n - jc : nc;
    for (std::size_t pc = 0; pc < p.k; pc += gemm_kc) {
      const std::size_t kb = p.k - pc < gemm_kc ? p.k - pc : gemm_kc;
      const bool load = p.accumulate || pc > 0;  // later k blocks continue the stored sums
      bool in_place = false;
      if (p.b_windows != nullptr) {
        in_place =
            detail::windows_in_place<W, nr>(*p.b_windows, jc, nb, pc, kb, row_offset, col_offset);
        if (!in_place)
          detail::gemm_pack_b_windows<Arch, nr>(*p.b_windows, jc, nb, pc, kb, bpack);
      } else {
        detail::gemm_pack_b<Arch>(p, jc, nb, pc, kb, bpack);
      }
      for (std::size_t ic = 0; ic < p.m; ic += gemm_mc) {
        const std::size_t mb = p.m - ic < gemm_mc ? p.m - ic : gemm_mc;
        detail::gemm_pack_a<Arch>(p, ic, mb, pc, kb, apack);
        for (std::size_t jr = 0; jr < nb; jr += nr) {
          const std::size_t cols = nb - jr < nr ? nb - jr : nr;
          const auto tiles = [&](const auto& b_rows) {
            detail::gemm_column_tiles<Arch>(apack, b_rows, mb, kb, cols, p.c + ic * p.ldc + jc + jr,
                                            p.ldc, load, edge);
          };
          if (in_place) {
            detail::in_place_b_rows<vb> b_rows{p.b_windows->planes, row_offset, {}};
            for (std::size_t v = 0; v < vb; ++v)
              b_rows.col_offset[v] = col_offset[jr / W + v];
            tiles(b_rows);
          } else {
            tiles(detail::packed_b_rows<W, vb>{bpack + jr * kb});
          }
        }
      }
    }
  }
}

}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
