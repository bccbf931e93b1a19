// im2col of every kernel set equals the scalar reference bit for bit (a copy: NaN payloads and
// signed zeros included) on random window geometries: strides, dilations, paddings wider than
// the kernel, windows that stop short of the image's far edge or run past it, and several
// samples side by side (ldcol); nothing is written outside col's rows or the scratch it asks for.
// The reference itself against a hand-derived gather.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernel_sets.hpp"
#include "ptq/kernels/im2col.hpp"

namespace {

using ptq::kernels::window_geometry;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// PyTorch's output size of one axis (0 when no window fits).
std::size_t conv_out(std::size_t in, std::size_t k, std::size_t s, std::size_t pad, std::size_t d) {
  const std::size_t span = d * (k - 1) + 1;
  return in + 2 * pad < span ? 0 : (in + 2 * pad - span) / s + 1;
}

window_geometry random_geometry(std::mt19937& rng) {
  auto pick = [&](std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
  };
  window_geometry g;
  g.channels = pick(1, 3);
  g.img_h = pick(1, 20);
  g.img_w = pick(1, 40);
  g.kernel_h = pick(1, 5);
  g.kernel_w = pick(1, 5);
  g.stride_h = pick(1, 3);
  g.stride_w = pick(1, 3);
  g.pad_h = pick(0, 1) == 0 ? 0 : pick(1, 6);
  g.pad_w = pick(0, 1) == 0 ? 0 : pick(1, 6);
  g.dilation_h = pick(1, 3);
  g.dilation_w = pick(1, 3);
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

std::vector<float> random_image(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 19);
  std::vector<float> v(n);
  std::uint32_t nan_bits = 0x7fc01234U;
  float nan_payload = 0.0f;
  std::memcpy(&nan_payload, &nan_bits, sizeof nan_payload);
  for (auto& x : v) {
    const int p = pick(rng);
    x = p == 0 ? -0.0f : p == 1 ? nan_payload : nd(rng);
  }
  return v;
}

constexpr float sentinel = 12345.0f;

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
  ptq::kernels::im2col_ref(g, img.data(), col.data(), 4, nullptr);
  CHECK(col == want);
  for (const auto& k : ptq_test::available_kernel_sets()) {
    INFO(k.arch_name);
    std::vector<float> scratch(ptq::kernels::im2col_scratch_floats(g));
    std::vector<float> c(16, sentinel);
    k.im2col(g, img.data(), c.data(), 4, scratch.data());
    CHECK(c == want);
  }
}

TEST_CASE("im2col of every kernel set equals the reference bit for bit", "[im2col]") {
  std::mt19937 rng(41);
  for (int iter = 0; iter < 400; ++iter) {
    const window_geometry g = random_geometry(rng);
    const std::size_t P = g.out_h * g.out_w;
    const std::size_t rows = g.channels * g.kernel_h * g.kernel_w;
    const std::size_t ldcol = P + (iter % 3) * 5;  // several samples side by side
    const auto img = random_image(g.channels * g.img_h * g.img_w, rng);
    std::vector<float> want(rows * ldcol, sentinel);
    ptq::kernels::im2col_ref(g, img.data(), want.data(), ldcol, nullptr);
    for (const auto& k : ptq_test::available_kernel_sets()) {
      INFO("iteration " << iter << " arch " << k.arch_name << ": " << g.channels << "x" << g.img_h
                        << "x" << g.img_w << " kernel " << g.kernel_h << "x" << g.kernel_w
                        << " stride " << g.stride_h << "," << g.stride_w << " pad " << g.pad_h
                        << "," << g.pad_w << " dilation " << g.dilation_h << "," << g.dilation_w
                        << " out " << g.out_h << "x" << g.out_w);
      const std::size_t need = ptq::kernels::im2col_scratch_floats(g);
      std::vector<float> scratch(need + 16, sentinel);
      std::vector<float> col(rows * ldcol, sentinel);
      k.im2col(g, img.data(), col.data(), ldcol, scratch.data());
      REQUIRE(same_bits(col, want));
      for (std::size_t i = need; i < scratch.size(); ++i)
        REQUIRE(scratch[i] == sentinel);
    }
  }
}
