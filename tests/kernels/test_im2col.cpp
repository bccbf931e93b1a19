// The convolution's windows as a GEMM operand (kernels/windows.hpp, im2col.hpp): im2col_ref
// against a hand-derived gather; pad_windows of every kernel set equals the reference bit for bit
// (a copy: NaN payloads and signed zeros included) in both layouts; and a GEMM whose B is read
// from the windows equals, bit for bit, the reference GEMM over the explicit im2col matrix
// (windows as columns) or its transpose with the rows in (tap, channel) order (windows as rows),
// on every kernel set: random geometries with strides, dilations, paddings wider than the
// kernel, windows that stop short of the image's far edge or run past it, several samples (also
// picked by index from more), column tiles (j0) and k across the cache blocks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "arch_kernels.hpp"
#include "ptq/kernels/im2col.hpp"

namespace {

using ptq::kernels::gemm_problem;
using ptq::kernels::gemm_windows;
using ptq::kernels::window_geometry;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// PyTorch's output size of one axis (0 when no window fits).
std::size_t conv_out(std::size_t in, std::size_t k, std::size_t s, std::size_t pad, std::size_t d) {
  const std::size_t span = d * (k - 1) + 1;
  return in + 2 * pad < span ? 0 : (in + 2 * pad - span) / s + 1;
}

window_geometry random_geometry(std::mt19937& rng, std::size_t max_channels) {
  auto pick = [&](std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
  };
  window_geometry g;
  g.channels = pick(1, max_channels);
  g.img_h = pick(1, 14);
  g.img_w = pick(1, 30);
  g.kernel_h = pick(1, 4);
  g.kernel_w = pick(1, 4);
  g.stride_h = pick(1, 3);
  g.stride_w = pick(0, 2) == 0 ? pick(2, 3) : 1;
  g.pad_h = pick(0, 1) == 0 ? 0 : pick(1, 5);
  g.pad_w = pick(0, 1) == 0 ? 0 : pick(1, 5);
  g.dilation_h = pick(1, 2);
  g.dilation_w = pick(0, 2) == 0 ? 2 : 1;
  g.out_h = conv_out(g.img_h, g.kernel_h, g.stride_h, g.pad_h, g.dilation_h);
  g.out_w = conv_out(g.img_w, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w);
  // Sometimes fewer windows (the far edge unread) or more (past the image: a transpose's
  // adjoint grid with output padding reads zeros there).
  const std::size_t change = pick(0, 5);
  if (change == 0 && g.out_w > 1)
    g.out_w -= pick(1, g.out_w - 1);
  if (change == 1)
    g.out_w += pick(1, 3);
  if (change == 2)
    g.out_h += pick(1, 3);
  return g;
}

/// Normal values with signed zeros, and (`nan`) one NaN with a payload that a copy must keep.
std::vector<float> random_floats(std::size_t n, std::mt19937& rng, bool nan = false) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 19);
  std::vector<float> v(n);
  const std::uint32_t nan_bits = 0x7fc01234U;
  float nan_payload = 0.0f;
  std::memcpy(&nan_payload, &nan_bits, sizeof nan_payload);
  for (auto& x : v) {
    const int p = pick(rng);
    x = p == 0 ? -0.0f : p == 1 ? 0.0f : nd(rng);
  }
  if (nan && !v.empty())
    v[n / 2] = nan_payload;
  return v;
}

std::string describe(const window_geometry& g) {
  std::ostringstream o;
  o << g.channels << "x" << g.img_h << "x" << g.img_w << " kernel " << g.kernel_h << "x"
    << g.kernel_w << " stride " << g.stride_h << "," << g.stride_w << " pad " << g.pad_h << ","
    << g.pad_w << " dilation " << g.dilation_h << "," << g.dilation_w << " out " << g.out_h << "x"
    << g.out_w;
  return o.str();
}

constexpr float sentinel = 12345.0f;

/// The samples' padded planes, as pad_windows_ref lays them out.
std::vector<float> padded(const window_geometry& g, const std::vector<float>& img,
                          std::size_t samples, bool pixel_major) {
  const std::size_t sf = ptq::kernels::padded_sample_floats(g);
  const std::size_t in = g.channels * g.img_h * g.img_w;
  std::vector<float> planes(samples * sf);
  for (std::size_t s = 0; s < samples; ++s)
    ptq::kernels::pad_windows_ref(g, pixel_major, img.data() + s * in, planes.data() + s * sf);
  return planes;
}

/// The explicit B the windows stand for, row-major [k, n] (ldb = n), from im2col_ref.
std::vector<float> explicit_b(const window_geometry& g, const std::vector<float>& img,
                              std::size_t samples, bool pixel_major) {
  const std::size_t P = g.out_h * g.out_w, taps = g.kernel_h * g.kernel_w;
  const std::size_t kdim = g.channels * taps, in = g.channels * g.img_h * g.img_w;
  std::vector<float> col(kdim * samples * P);
  for (std::size_t s = 0; s < samples; ++s)
    ptq::kernels::im2col_ref(g, img.data() + s * in, col.data() + s * P, samples * P);
  if (!pixel_major)
    return col;
  std::vector<float> rows(samples * P * kdim);
  for (std::size_t q = 0; q < samples * P; ++q) {
    for (std::size_t t = 0; t < taps; ++t) {
      for (std::size_t c = 0; c < g.channels; ++c)
        rows[q * kdim + t * g.channels + c] = col[(c * taps + t) * samples * P + q];
    }
  }
  return rows;
}

}  // namespace

TEST_CASE("im2col reference: a hand-derived 3x3 image, 2x2 kernel, padding 1, stride 2",
          "[im2col]") {
  window_geometry g;
  g.channels = 1;
  g.img_h = g.img_w = 3;
  g.kernel_h = g.kernel_w = 2;
  g.stride_h = g.stride_w = 2;
  g.pad_h = g.pad_w = 1;
  g.out_h = g.out_w = 2;
  const std::vector<float> img = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  // Window (oy, ox) has its top-left tap at pixel (2*oy - 1, 2*ox - 1).
  const std::vector<float> want = {
      0, 0, 0, 5,  // tap (0, 0)
      0, 0, 4, 6,  // tap (0, 1)
      0, 2, 0, 8,  // tap (1, 0)
      1, 3, 7, 9,  // tap (1, 1)
  };
  std::vector<float> col(16, sentinel);
  ptq::kernels::im2col_ref(g, img.data(), col.data(), 4);
  CHECK(col == want);
  // The padded plane reaches the last tap of the last window: rows and columns -1..2.
  const std::vector<float> plane = {0, 0, 0, 0, 0, 1, 2, 3, 0, 4, 5, 6, 0, 7, 8, 9};
  CHECK(ptq::kernels::padded_sample_floats(g) == 16);
  std::vector<float> out(16, sentinel);
  ptq::kernels::pad_windows_ref(g, false, img.data(), out.data());
  CHECK(out == plane);
}

TEST_CASE("pad_windows of every kernel set equals the reference bit for bit", "[im2col]") {
  std::mt19937 rng(41);
  for (int iter = 0; iter < 300; ++iter) {
    const window_geometry g = random_geometry(rng, 9);
    const auto img = random_floats(g.channels * g.img_h * g.img_w, rng, true);
    const std::size_t sf = ptq::kernels::padded_sample_floats(g);
    for (const bool pixel_major : {false, true}) {
      std::vector<float> want(sf + 16, sentinel);
      ptq::kernels::pad_windows_ref(g, pixel_major, img.data(), want.data());
      for (const auto& k : ptq_test::available_kernel_sets()) {
        INFO("iteration " << iter << " arch " << k.arch_name << " pixel-major " << pixel_major
                          << ": " << describe(g));
        std::vector<float> got(sf + 16, sentinel);
        k.pad_windows(g, pixel_major, img.data(), got.data());
        REQUIRE(same_bits(got, want));  // the sentinels past sf included
      }
    }
  }
}

namespace {

/// One case of a GEMM whose B is read from windows: m rows, `samples` images (picked by index
/// from more when `indexed`), columns from j0, against the reference GEMM over the explicit
/// matrix (and the reference reading the windows), plain and accumulating, on every kernel set.
void check_windows_gemm(const window_geometry& g, std::size_t samples, std::size_t m,
                        bool pixel_major, bool indexed, bool tile, std::mt19937& rng,
                        const std::string& what) {
  const std::size_t P = g.out_h * g.out_w, kdim = g.channels * g.kernel_h * g.kernel_w;
  const std::size_t k = pixel_major ? samples * P : kdim, n = pixel_major ? kdim : samples * P;
  if (k == 0 || n == 0)
    return;
  // Indexed: planes laid out for more samples than the GEMM reads, read in a shuffled order with
  // repeats, against the explicit matrix of the samples gathered.
  const std::size_t laid = indexed ? samples + 2 : samples, image = g.channels * g.img_h * g.img_w;
  const auto all = random_floats(laid * image, rng);
  std::vector<std::size_t> sample_of(samples);
  std::vector<float> img(samples * image);
  for (std::size_t s = 0; s < samples; ++s) {
    sample_of[s] = indexed ? std::uniform_int_distribution<std::size_t>(0, laid - 1)(rng) : s;
    std::copy_n(all.begin() + static_cast<std::ptrdiff_t>(sample_of[s] * image), image,
                img.begin() + static_cast<std::ptrdiff_t>(s * image));
  }
  const auto a = random_floats(m * k, rng);
  const auto c0 = random_floats(m * n, rng);
  const auto planes = padded(g, all, laid, pixel_major);
  const auto b = explicit_b(g, img, samples, pixel_major);
  // A tile of the columns [j0, n), as gemm_tasks hands out (whole 96-column blocks where n is).
  const std::size_t j0 = !tile ? 0 : n % 96 == 0 && n > 96 ? 96 : n / 3;
  gemm_windows w;
  w.g = g;
  w.planes = planes.data();
  w.samples = samples;
  w.sample_of = indexed ? sample_of.data() : nullptr;
  w.pixel_major = pixel_major;
  w.j0 = j0;
  for (const bool acc : {false, true}) {
    gemm_problem ex;  // over the explicit matrix
    ex.m = m;
    ex.n = n - j0;
    ex.k = k;
    ex.a = a.data();
    ex.lda = k;
    ex.b = b.data() + j0;
    ex.ldb = n;
    ex.ldc = n;
    ex.accumulate = acc;
    gemm_problem win = ex;
    win.b = nullptr;
    win.ldb = 0;
    win.b_windows = &w;
    for (const bool fused : {false, true}) {
      std::vector<float> want = c0, got = c0;
      ex.c = want.data();
      win.c = got.data();
      ptq::kernels::gemm_ref(ex, fused);
      ptq::kernels::gemm_ref(win, fused);
      INFO(what << " reference, fused " << fused << ": " << describe(g));
      REQUIRE(same_bits(got, want));
    }
    for (const auto& ak : ptq_layers_test::available_kernels()) {
      INFO(what << " arch " << ak.set.arch_name << " accumulate " << acc << " pixel-major "
                << pixel_major << " indexed " << indexed << " m " << m << " j0 " << j0 << ": "
                << describe(g));
      std::vector<float> want = c0, got = c0;
      ex.c = want.data();
      win.c = got.data();
      ptq::kernels::gemm_ref(ex, ak.fused);
      ak.set.gemm(win, nullptr);
      REQUIRE(same_bits(got, want));
    }
  }
}

/// 3x3 windows, padding 1, stride 1 over `channels` x h x w.
window_geometry same_size_3x3(std::size_t channels, std::size_t h, std::size_t w) {
  window_geometry g;
  g.channels = channels;
  g.img_h = g.out_h = h;
  g.img_w = g.out_w = w;
  g.kernel_h = g.kernel_w = 3;
  g.pad_h = g.pad_w = 1;
  return g;
}

}  // namespace

TEST_CASE("a GEMM reading B from windows equals the GEMM over the explicit im2col, bit for bit",
          "[im2col][gemm]") {
  std::mt19937 rng(43);
  std::uniform_int_distribution<std::size_t> pick_m(1, 19), pick_s(1, 3);
  for (int iter = 0; iter < 160; ++iter) {
    // Windows as rows have k = samples x positions, which crosses the 256-deep k blocks; as
    // columns k = channels x taps, so some cases get many channels.
    const window_geometry g = random_geometry(rng, iter % 5 == 0 ? 40 : 6);
    const std::size_t samples = pick_s(rng), m = pick_m(rng);
    check_windows_gemm(g, samples, m, iter % 2 == 1, iter % 4 >= 2, iter % 3 == 0, rng,
                       "iteration " + std::to_string(iter));
  }
}

TEST_CASE("B read in place: which blocks qualify, and their offsets", "[im2col][gemm]") {
  using ptq::kernels::detail::window_index;
  using ptq::kernels::detail::windows_in_place;
  std::size_t rows[256], cols[960];
  // The offsets windows_in_place filled: of each W-float vector and of rows [p0, p0 + kb).
  const auto check_offsets = [&](const gemm_windows& w, std::size_t vectors, std::size_t p0,
                                 std::size_t kb) {
    const window_index ix(w);
    for (std::size_t v = 0; v < vectors; ++v)
      CHECK(cols[v] == ix.column_offset(v * 16));
    for (std::size_t q = 0; q < kb; ++q)
      CHECK(rows[q] == ix.row_offset(p0 + q));
  };
  // Windows as columns over 12 x 16 positions: every 16-float vector is one row of positions.
  gemm_windows w;
  w.g = same_size_3x3(3, 12, 16);
  w.samples = 2;
  CHECK(windows_in_place<16, 32>(w, 0, 384, 0, 27, rows, cols));
  check_offsets(w, 384 / 16, 0, 27);
  CHECK_FALSE(windows_in_place<16, 32>(w, 0, 368, 0, 27, rows, cols));  // not whole slivers
  w.g = same_size_3x3(3, 12, 12);  // a vector of 16 spans two rows of 12 positions
  w.samples = 4;
  CHECK_FALSE(windows_in_place<16, 32>(w, 0, 576, 0, 27, rows, cols));
  CHECK(windows_in_place<4, 12>(w, 0, 576, 0, 27, rows, cols));
  w.g = same_size_3x3(3, 1, 8);  // 8 positions per sample: a vector may not cross samples
  const std::size_t picks[] = {1, 0, 3, 2};
  w.sample_of = picks;
  CHECK(windows_in_place<8, 16>(w, 0, 32, 0, 27, rows, cols));
  CHECK_FALSE(windows_in_place<16, 32>(w, 0, 32, 0, 27, rows, cols));
  w.g = same_size_3x3(3, 4, 8);  // a vector of 16 spans two rows of 8 positions
  CHECK_FALSE(windows_in_place<16, 32>(w, 0, 128, 0, 27, rows, cols));
  w.g.stride_w = 2;  // positions two apart
  w.g.out_w = 4;
  w.g.img_w = 8;
  CHECK_FALSE(windows_in_place<4, 12>(w, 0, 48, 0, 27, rows, cols));
  // Windows as rows (pixel-major): a vector is channels of one tap.
  w = gemm_windows{};
  w.g = same_size_3x3(32, 5, 7);
  w.pixel_major = true;
  w.samples = 10;
  CHECK(windows_in_place<16, 32>(w, 0, 288, 256, 94, rows, cols));
  check_offsets(w, 288 / 16, 256, 94);
  // 12 channels a tap: vectors of 4 stay in a tap; one of 16 runs from a kernel row's last tap
  // into the next kernel row's first, which lies elsewhere.
  w.g = same_size_3x3(12, 5, 7);
  CHECK(windows_in_place<4, 12>(w, 0, 108, 0, 20, rows, cols));
  CHECK_FALSE(windows_in_place<16, 32>(w, 0, 96, 0, 20, rows, cols));
}

TEST_CASE("a GEMM reading B in place equals the GEMM over the explicit im2col, bit for bit",
          "[im2col][gemm]") {
  // Shapes whose blocks qualify on every kernel set (columns a multiple of 96 = 32, 24 and 12
  // floats a sliver; vectors of 16, 8 and 4 neighbours): windows as columns over 12 x 16
  // positions, windows as rows of 32 channels x 9 taps; with many rows, partial row tiles,
  // samples by index and column tiles.
  std::mt19937 rng(47);
  for (const std::size_t m : {64, 13}) {
    for (const bool indexed : {false, true}) {
      for (const bool tile : {false, true}) {
        check_windows_gemm(same_size_3x3(40, 12, 16), 2, m, false, indexed, tile, rng, "columns");
        check_windows_gemm(same_size_3x3(32, 8, 9), 4, m, true, indexed, tile, rng, "rows");
      }
    }
  }
}
