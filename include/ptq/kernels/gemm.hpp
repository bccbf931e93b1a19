// Single-precision GEMM for the layer arithmetic of AdaRound: C = A·B or C += A·B, row-major with
// leading dimensions, A and/or B optionally read transposed. The scalar reference defines the
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
#include <type_traits>
#include <vector>

#include "ptq/core/abi.hpp"
#include "ptq/kernels/simd_support.hpp"

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
template <bool Fused>
inline void gemm_ref_loop(const gemm_problem& p) noexcept {
  constexpr std::size_t w = 4;
  const std::size_t a_i = p.trans_a ? 1 : p.lda, a_q = p.trans_a ? p.lda : 1;
  const std::size_t b_q = p.trans_b ? 1 : p.ldb, b_j = p.trans_b ? p.ldb : 1;
  for (std::size_t i = 0; i < p.m; ++i) {
    const float* a = p.a + i * a_i;
    float* c = p.c + i * p.ldc;
    std::size_t j = 0;
    for (; j + w <= p.n; j += w) {
      float acc[w];
      for (std::size_t t = 0; t < w; ++t)
        acc[t] = p.accumulate ? c[j + t] : 0.0f;
      const float* b = p.b + j * b_j;
      for (std::size_t q = 0; q < p.k; ++q) {
        const float x = a[q * a_q];
        for (std::size_t t = 0; t < w; ++t)
          acc[t] = ref_madd<Fused>(x, b[t * b_j + q * b_q], acc[t]);
      }
      for (std::size_t t = 0; t < w; ++t)
        c[j + t] = acc[t];
    }
    for (; j < p.n; ++j) {
      float acc = p.accumulate ? c[j] : 0.0f;
      const float* b = p.b + j * b_j;
      for (std::size_t q = 0; q < p.k; ++q)
        acc = ref_madd<Fused>(a[q * a_q], b[q * b_q], acc);
      c[j] = acc;
    }
  }
}

}  // namespace detail

/// Scalar reference, with `fused` = whether each multiply-add is one rounding (std::fma).
inline void gemm_ref(const gemm_problem& p, bool fused) noexcept {
  if (fused) {
    detail::gemm_ref_loop<true>(p);
  } else {
    detail::gemm_ref_loop<false>(p);
  }
}

/// The references in kernel_set form (the workspace is unused).
inline void gemm_ref_unfused(const gemm_problem& p, float* /*workspace*/) {
  detail::gemm_ref_loop<false>(p);
}
inline void gemm_ref_fused(const gemm_problem& p, float* /*workspace*/) {
  detail::gemm_ref_loop<true>(p);
}

/// Whether the SIMD kernel of Arch uses a fused multiply-add (and so equals gemm_ref(p, true)):
/// the fma3 arches and avx512f. Every other arch (sse2, avx, fma4, neon) takes mul then add.
template <class Arch>
inline constexpr bool gemm_uses_fma = detail::has_fused_madd<Arch>;

namespace detail {

/// Register tile of the micro-kernel: 4 rows x 3 batches (12 accumulators; 4 x 24 on AVX2). Four
/// rows divide the AdaRound shapes (32 samples, 64 channels) without padding.
inline constexpr std::size_t gemm_mr = 4;
template <class Arch>
inline constexpr std::size_t gemm_nr = 3 * fbatch<Arch>::size;

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

/// Packs rows [i0, i0+mb) x k [p0, p0+kb) of A as mr-row slivers: sliver r holds, for each q,
/// the mr values A(i0+r*mr.., p0+q) (rows past mb are zero).
inline void gemm_pack_a(const gemm_problem& p, std::size_t i0, std::size_t mb, std::size_t p0,
                        std::size_t kb, float* out) noexcept {
  for (std::size_t r = 0; r < mb; r += gemm_mr) {
    const std::size_t rows = mb - r < gemm_mr ? mb - r : gemm_mr;
    for (std::size_t q = 0; q < kb; ++q) {
      for (std::size_t ii = 0; ii < gemm_mr; ++ii) {
        const std::size_t i = i0 + r + ii, kq = p0 + q;
        out[ii] = ii >= rows ? 0.0f : p.trans_a ? p.a[kq * p.lda + i] : p.a[i * p.lda + kq];
      }
      out += gemm_mr;
    }
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
        B::load_unaligned(src).store_aligned(out);
        B::load_unaligned(src + W).store_aligned(out + W);
        B::load_unaligned(src + 2 * W).store_aligned(out + 2 * W);
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
      // Column by column: each reads a contiguous run of b; the writes stride by nr.
      for (std::size_t jj = 0; jj < nr; ++jj) {
        if (jj < cols) {
          const float* src = p.b + (j0 + s + jj) * p.ldb + p0;
          for (std::size_t q = 0; q < kb; ++q)
            out[q * nr + jj] = src[q];
        } else {
          for (std::size_t q = 0; q < kb; ++q)
            out[q * nr + jj] = 0.0f;
        }
      }
      out += kb * nr;
    }
  }
}

/// The register-blocked micro-kernel: a 4 x nr tile of C (leading dimension ldc) from packed
/// slivers, starting from C (load) or from zero. Twelve independent accumulator chains hide the
/// FMA latency; per k: 3 loads of B, 4 broadcasts of A, 12 multiply-adds.
template <class Arch>
void gemm_micro(std::size_t kb, const float* ap, const float* bp, float* c, std::size_t ldc,
                bool load) noexcept {
  using B = fbatch<Arch>;
  constexpr std::size_t W = B::size;
  B c00(0.0f), c01(0.0f), c02(0.0f), c10(0.0f), c11(0.0f), c12(0.0f);
  B c20(0.0f), c21(0.0f), c22(0.0f), c30(0.0f), c31(0.0f), c32(0.0f);
  float* r0 = c;
  float* r1 = c + ldc;
  float* r2 = c + 2 * ldc;
  float* r3 = c + 3 * ldc;
  if (load) {
    c00 = B::load_unaligned(r0);
    c01 = B::load_unaligned(r0 + W);
    c02 = B::load_unaligned(r0 + 2 * W);
    c10 = B::load_unaligned(r1);
    c11 = B::load_unaligned(r1 + W);
    c12 = B::load_unaligned(r1 + 2 * W);
    c20 = B::load_unaligned(r2);
    c21 = B::load_unaligned(r2 + W);
    c22 = B::load_unaligned(r2 + 2 * W);
    c30 = B::load_unaligned(r3);
    c31 = B::load_unaligned(r3 + W);
    c32 = B::load_unaligned(r3 + 2 * W);
  }
  for (std::size_t q = 0; q < kb; ++q) {
    const B b0 = B::load_aligned(bp);
    const B b1 = B::load_aligned(bp + W);
    const B b2 = B::load_aligned(bp + 2 * W);
    B a(ap[0]);
    c00 = gemm_madd<Arch>(a, b0, c00);
    c01 = gemm_madd<Arch>(a, b1, c01);
    c02 = gemm_madd<Arch>(a, b2, c02);
    a = B(ap[1]);
    c10 = gemm_madd<Arch>(a, b0, c10);
    c11 = gemm_madd<Arch>(a, b1, c11);
    c12 = gemm_madd<Arch>(a, b2, c12);
    a = B(ap[2]);
    c20 = gemm_madd<Arch>(a, b0, c20);
    c21 = gemm_madd<Arch>(a, b1, c21);
    c22 = gemm_madd<Arch>(a, b2, c22);
    a = B(ap[3]);
    c30 = gemm_madd<Arch>(a, b0, c30);
    c31 = gemm_madd<Arch>(a, b1, c31);
    c32 = gemm_madd<Arch>(a, b2, c32);
    ap += gemm_mr;
    bp += 3 * W;
  }
  c00.store_unaligned(r0);
  c01.store_unaligned(r0 + W);
  c02.store_unaligned(r0 + 2 * W);
  c10.store_unaligned(r1);
  c11.store_unaligned(r1 + W);
  c12.store_unaligned(r1 + 2 * W);
  c20.store_unaligned(r2);
  c21.store_unaligned(r2 + W);
  c22.store_unaligned(r2 + 2 * W);
  c30.store_unaligned(r3);
  c31.store_unaligned(r3 + W);
  c32.store_unaligned(r3 + 2 * W);
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
  using detail::gemm_mr;
  constexpr std::size_t nr = detail::gemm_nr<Arch>;
  constexpr std::size_t nc = gemm_nc / nr * nr;
  static_assert(nc == gemm_nc, "gemm_nc must be a multiple of every arch's nr");
  static_assert(gemm_mc % gemm_mr == 0, "gemm_mc must be a multiple of mr");
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
  alignas(64) float edge[gemm_mr * nr];            // partial tiles go through this buffer

  for (std::size_t jc = 0; jc < p.n; jc += nc) {
    const std::size_t nb = p.n - jc < nc ? p.n - jc : nc;
    for (std::size_t pc = 0; pc < p.k; pc += gemm_kc) {
      const std::size_t kb = p.k - pc < gemm_kc ? p.k - pc : gemm_kc;
      const bool load = p.accumulate || pc > 0;  // later k blocks continue the stored sums
      detail::gemm_pack_b<Arch>(p, jc, nb, pc, kb, bpack);
      for (std::size_t ic = 0; ic < p.m; ic += gemm_mc) {
        const std::size_t mb = p.m - ic < gemm_mc ? p.m - ic : gemm_mc;
        detail::gemm_pack_a(p, ic, mb, pc, kb, apack);
        for (std::size_t jr = 0; jr < nb; jr += nr) {
          const std::size_t cols = nb - jr < nr ? nb - jr : nr;
          const float* bp = bpack + jr * kb;
          for (std::size_t ir = 0; ir < mb; ir += gemm_mr) {
            const std::size_t rows = mb - ir < gemm_mr ? mb - ir : gemm_mr;
            const float* ap = apack + ir * kb;
            float* ct = p.c + (ic + ir) * p.ldc + jc + jr;
            if (rows == gemm_mr && cols == nr) {
              detail::gemm_micro<Arch>(kb, ap, bp, ct, p.ldc, load);
              continue;
            }
            if (load) {
              for (std::size_t ii = 0; ii < gemm_mr; ++ii) {
                for (std::size_t jj = 0; jj < nr; ++jj)
                  edge[ii * nr + jj] = ii < rows && jj < cols ? ct[ii * p.ldc + jj] : 0.0f;
              }
            }
            detail::gemm_micro<Arch>(kb, ap, bp, edge, nr, load);
            for (std::size_t ii = 0; ii < rows; ++ii) {
              for (std::size_t jj = 0; jj < cols; ++jj)
                ct[ii * p.ldc + jj] = edge[ii * nr + jj];
            }
          }
        }
      }
    }
  }
}

}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
