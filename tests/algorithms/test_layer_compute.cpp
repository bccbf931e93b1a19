// The layer arithmetic of AdaRound against direct loops in double: forward (Linear, Conv2d,
// ConvTranspose2d with stride, padding, dilation, groups, output_padding) and the weight gradient
// by central differences of the double forward; bit-identical results for every thread count and
// equal to the layer computed with the scalar GEMM reference; geometry errors.
//
// Tolerance: a float sum of N products, in any order, with or without FMA, is within
// N·2^-24·sum|terms| of the exact sum (first order); the double reference is exact to ~1e-16 of
// that. Each element is checked against (N + 1)·2^-23·sum|terms|, N counted per element.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../kernels/arch_kernels.hpp"
#include "ptq/algorithms/layer/layer_compute.hpp"

namespace {

using ptq::layer_geometry;
using ptq::layer_type;
using dvec = std::vector<double>;

std::int64_t i64(std::size_t v) {
  return static_cast<std::int64_t>(v);
}

/// PyTorch's output size, written out here independently of the library.
std::size_t torch_out(const layer_geometry& g, bool h) {
  const std::int64_t in = i64(h ? g.in_h : g.in_w), k = i64(h ? g.kernel_h : g.kernel_w),
                     s = i64(h ? g.stride_h : g.stride_w), p = i64(h ? g.pad_h : g.pad_w),
                     d = i64(h ? g.dilation_h : g.dilation_w),
                     op = i64(h ? g.output_padding_h : g.output_padding_w);
  if (g.type == layer_type::linear)
    return 1;
  if (g.type == layer_type::conv2d)
    return static_cast<std::size_t>((in + 2 * p - d * (k - 1) - 1) / s + 1);
  return static_cast<std::size_t>((in - 1) * s - 2 * p + d * (k - 1) + op + 1);
}

/// Direct loops: y[n, cout, oh, ow] (Linear [n, cout]) in double.
dvec naive_forward(const layer_geometry& g, const dvec& x, std::size_t n, const dvec& w,
                   const double* bias) {
  const std::size_t cin = g.in_channels, cout = g.out_channels;
  if (g.type == layer_type::linear) {
    dvec y(n * cout);
    for (std::size_t s = 0; s < n; ++s) {
      for (std::size_t o = 0; o < cout; ++o) {
        double acc = bias != nullptr ? bias[o] : 0.0;
        for (std::size_t i = 0; i < cin; ++i)
          acc += w[o * cin + i] * x[s * cin + i];
        y[s * cout + o] = acc;
      }
    }
    return y;
  }
  const std::size_t oh = torch_out(g, true), ow = torch_out(g, false), ih = g.in_h, iw = g.in_w;
  const std::size_t kh = g.kernel_h, kw = g.kernel_w;
  const std::size_t cin_g = cin / g.groups, cout_g = cout / g.groups;
  dvec y(n * cout * oh * ow, 0.0);
  for (std::size_t s = 0; s < n; ++s) {
    for (std::size_t o = 0; o < cout; ++o) {
      for (std::size_t p = 0; p < oh * ow; ++p)
        y[(s * cout + o) * oh * ow + p] = bias != nullptr ? bias[o] : 0.0;
    }
  }
  if (g.type == layer_type::conv2d) {
    for (std::size_t s = 0; s < n; ++s) {
      for (std::size_t o = 0; o < cout; ++o) {
        const std::size_t grp = o / cout_g;
        for (std::size_t oy = 0; oy < oh; ++oy) {
          for (std::size_t ox = 0; ox < ow; ++ox) {
            double acc = 0.0;
            for (std::size_t cl = 0; cl < cin_g; ++cl) {
              for (std::size_t ky = 0; ky < kh; ++ky) {
                for (std::size_t kx = 0; kx < kw; ++kx) {
                  const std::int64_t iy = i64(oy * g.stride_h + ky * g.dilation_h) - i64(g.pad_h);
                  const std::int64_t ix = i64(ox * g.stride_w + kx * g.dilation_w) - i64(g.pad_w);
                  if (iy < 0 || ix < 0 || iy >= i64(ih) || ix >= i64(iw))
                    continue;
                  const std::size_t ci = grp * cin_g + cl;
                  acc += w[((o * cin_g + cl) * kh + ky) * kw + kx] *
                         x[((s * cin + ci) * ih + static_cast<std::size_t>(iy)) * iw +
                           static_cast<std::size_t>(ix)];
                }
              }
            }
            y[((s * cout + o) * oh + oy) * ow + ox] += acc;
          }
        }
      }
    }
    return y;
  }
  // ConvTranspose2d: every input pixel scatters w[ci, co, ky, kx]·x into output pixel
  // (iy*stride - pad + ky*dilation, ix*stride - pad + kx*dilation).
  for (std::size_t s = 0; s < n; ++s) {
    for (std::size_t ci = 0; ci < cin; ++ci) {
      const std::size_t grp = ci / cin_g;
      for (std::size_t iy = 0; iy < ih; ++iy) {
        for (std::size_t ix = 0; ix < iw; ++ix) {
          const double xv = x[((s * cin + ci) * ih + iy) * iw + ix];
          for (std::size_t cl = 0; cl < cout_g; ++cl) {
            for (std::size_t ky = 0; ky < kh; ++ky) {
              for (std::size_t kx = 0; kx < kw; ++kx) {
                const std::int64_t oy = i64(iy * g.stride_h + ky * g.dilation_h) - i64(g.pad_h);
                const std::int64_t ox = i64(ix * g.stride_w + kx * g.dilation_w) - i64(g.pad_w);
                if (oy < 0 || ox < 0 || oy >= i64(oh) || ox >= i64(ow))
                  continue;
                const std::size_t o = grp * cout_g + cl;
                y[((s * cout + o) * oh + static_cast<std::size_t>(oy)) * ow +
                  static_cast<std::size_t>(ox)] += w[((ci * cout_g + cl) * kh + ky) * kw + kx] * xv;
              }
            }
          }
        }
      }
    }
  }
  return y;
}

std::vector<float> random_floats(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v)
    x = nd(rng);
  return v;
}

dvec to_double(const std::vector<float>& v) {
  return dvec(v.begin(), v.end());
}
dvec abs_of(const dvec& v) {
  dvec r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    r[i] = std::fabs(v[i]);
  return r;
}
double dot(const dvec& a, const dvec& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

/// |got - want| <= (count + 1)·2^-23·abs_sum (see the file comment).
bool within_bound(double got, double want, double abs_sum, double count) {
  return std::fabs(got - want) <= (count + 1.0) * std::ldexp(abs_sum, -23);
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

struct named_geometry {
  const char* name;
  layer_geometry g;
};

layer_geometry linear(std::size_t cin, std::size_t cout) {
  layer_geometry g;
  g.type = layer_type::linear;
  g.in_channels = cin;
  g.out_channels = cout;
  return g;
}

/// The cases of the brief: Conv2d with stride 2, padding, dilation 2, groups 2; ConvTranspose2d
/// with stride 2, padding, output_padding 1, groups 2; plus asymmetric variants.
std::vector<named_geometry> accuracy_cases() {
  std::vector<named_geometry> out;
  out.push_back({"linear 37->19", linear(37, 19)});
  layer_geometry c;
  c.type = layer_type::conv2d;
  c.in_channels = 4;
  c.out_channels = 6;
  c.groups = 2;
  c.kernel_h = c.kernel_w = 3;
  c.stride_h = c.stride_w = 2;
  c.pad_h = c.pad_w = 1;
  c.dilation_h = c.dilation_w = 2;
  c.in_h = 9;
  c.in_w = 11;
  out.push_back({"conv2d s2 p1 d2 g2", c});
  layer_geometry c2;
  c2.type = layer_type::conv2d;
  c2.in_channels = 3;
  c2.out_channels = 5;
  c2.kernel_h = 2;
  c2.kernel_w = 3;
  c2.stride_h = 1;
  c2.stride_w = 2;
  c2.pad_h = 0;
  c2.pad_w = 2;
  c2.dilation_h = 3;
  c2.dilation_w = 1;
  c2.in_h = 7;
  c2.in_w = 6;
  out.push_back({"conv2d 2x3 asymmetric", c2});
  layer_geometry t;
  t.type = layer_type::conv_transpose2d;
  t.in_channels = 4;
  t.out_channels = 6;
  t.groups = 2;
  t.kernel_h = t.kernel_w = 3;
  t.stride_h = t.stride_w = 2;
  t.pad_h = t.pad_w = 1;
  t.output_padding_h = t.output_padding_w = 1;
  t.in_h = 5;
  t.in_w = 4;
  out.push_back({"conv_transpose2d s2 p1 op1 g2", t});
  layer_geometry t2;
  t2.type = layer_type::conv_transpose2d;
  t2.in_channels = 3;
  t2.out_channels = 2;
  t2.kernel_h = 2;
  t2.kernel_w = 3;
  t2.stride_h = 2;
  t2.stride_w = 3;
  t2.pad_h = 0;
  t2.pad_w = 2;
  t2.dilation_h = 2;
  t2.dilation_w = 1;
  t2.output_padding_h = 1;
  t2.output_padding_w = 2;
  t2.in_h = 4;
  t2.in_w = 3;
  out.push_back({"conv_transpose2d d2 op(1,2) asymmetric", t2});
  return out;
}

}  // namespace

TEST_CASE("layer geometry: output sizes are PyTorch's", "[layers]") {
  for (const auto& c : accuracy_cases()) {
    INFO(c.name);
    REQUIRE(ptq::validate_geometry(c.g).ok());
    CHECK(ptq::output_h(c.g) == torch_out(c.g, true));
    CHECK(ptq::output_w(c.g) == torch_out(c.g, false));
  }
  // Values PyTorch prints for these modules.
  auto g = accuracy_cases()[1].g;  // Conv2d(4, 6, 3, stride=2, padding=1, dilation=2) on 9x11
  CHECK(ptq::output_h(g) == 4);
  CHECK(ptq::output_w(g) == 5);
  g = accuracy_cases()[3].g;  // ConvTranspose2d(4, 6, 3, 2, 1, output_padding=1) on 5x4
  CHECK(ptq::output_h(g) == 10);
  CHECK(ptq::output_w(g) == 8);
  CHECK(ptq::weight_size(g) == 4 * 3 * 3 * 3);
  CHECK(ptq::input_size(g) == 4 * 5 * 4);
  CHECK(ptq::output_size(g) == 6 * 10 * 8);
}

TEST_CASE("layer forward matches direct loops", "[layers]") {
  std::mt19937 rng(11);
  const std::size_t n = 3;
  for (const auto& ak : ptq_layers_test::available_kernels()) {
    for (const auto& c : accuracy_cases()) {
      INFO(c.name << " arch " << ak.set.arch_name);
      ptq::layer_compute lc(c.g, 1, ak.set);
      REQUIRE(lc.status().ok());
      const auto x = random_floats(n * lc.input_size(), rng);
      const auto w = random_floats(lc.weight_size(), rng);
      const auto b = random_floats(c.g.out_channels, rng);
      for (const bool with_bias : {false, true}) {
        std::vector<float> y(n * lc.output_size(), 1e30f);
        REQUIRE(lc.forward(x.data(), n, w.data(), with_bias ? b.data() : nullptr, y.data()).ok());
        const dvec bd = to_double(b), ba = abs_of(bd), ones_b(b.size(), 1.0);
        const dvec want =
            naive_forward(c.g, to_double(x), n, to_double(w), with_bias ? bd.data() : nullptr);
        const dvec abs_sum = naive_forward(c.g, abs_of(to_double(x)), n, abs_of(to_double(w)),
                                           with_bias ? ba.data() : nullptr);
        const dvec count = naive_forward(c.g, dvec(x.size(), 1.0), n, dvec(w.size(), 1.0),
                                         with_bias ? ones_b.data() : nullptr);
        REQUIRE(want.size() == y.size());
        for (std::size_t i = 0; i < y.size(); ++i) {
          INFO("element " << i << " got " << y[i] << " want " << want[i]);
          REQUIRE(within_bound(y[i], want[i], abs_sum[i], count[i]));
        }
      }
    }
  }
}

TEST_CASE("layer weight gradient matches central differences", "[layers]") {
  std::mt19937 rng(12);
  const std::size_t n = 3;
  for (const auto& ak : ptq_layers_test::available_kernels()) {
    for (const auto& c : accuracy_cases()) {
      INFO(c.name << " arch " << ak.set.arch_name);
      ptq::layer_compute lc(c.g, 1, ak.set);
      const auto x = random_floats(n * lc.input_size(), rng);
      const auto dy = random_floats(n * lc.output_size(), rng);
      const auto w = random_floats(lc.weight_size(), rng);
      std::vector<float> dw(lc.weight_size(), 1e30f);
      REQUIRE(lc.weight_grad(x.data(), n, dy.data(), dw.data()).ok());
      const dvec xd = to_double(x), dyd = to_double(dy), xa = abs_of(xd), dya = abs_of(dyd);
      const dvec b(c.g.out_channels, 0.25);
      for (std::size_t j = 0; j < dw.size(); ++j) {
        // L(w) = sum dy·y(w): central difference at the random w, step h (exact: L is affine).
        const double h = 0.5;
        dvec wp = to_double(w), wm = wp;
        wp[j] += h;
        wm[j] -= h;
        const double fd = (dot(dyd, naive_forward(c.g, xd, n, wp, b.data())) -
                           dot(dyd, naive_forward(c.g, xd, n, wm, b.data()))) /
                          (2.0 * h);
        dvec e(w.size(), 0.0);
        e[j] = 1.0;
        const double abs_sum = dot(dya, naive_forward(c.g, xa, n, e, nullptr));
        const double count =
            dot(dvec(dy.size(), 1.0), naive_forward(c.g, dvec(x.size(), 1.0), n, e, nullptr));
        INFO("weight " << j << " got " << dw[j] << " want " << fd);
        // The double difference carries rounding of the whole sum; allow 1e-12 of it.
        REQUIRE(std::fabs(dw[j] - fd) <=
                (count + 1.0) * std::ldexp(abs_sum, -23) + 1e-12 * (1.0 + std::fabs(fd)));
      }
    }
  }
}

TEST_CASE("layer results are bit-identical for 1, 2, 3 threads and equal the reference GEMM",
          "[layers]") {
  std::mt19937 rng(13);
  std::vector<named_geometry> cases;
  cases.push_back({"linear 64->200", linear(64, 200)});
  layer_geometry c;
  c.type = layer_type::conv2d;
  c.in_channels = 8;
  c.out_channels = 12;
  c.groups = 2;
  c.kernel_h = c.kernel_w = 3;
  c.stride_h = c.stride_w = 2;
  c.pad_h = c.pad_w = 1;
  c.dilation_h = c.dilation_w = 2;
  c.in_h = 17;
  c.in_w = 16;
  cases.push_back({"conv2d", c});
  layer_geometry t = c;
  t.type = layer_type::conv_transpose2d;
  t.dilation_h = t.dilation_w = 1;
  t.output_padding_h = t.output_padding_w = 1;
  t.in_h = 9;
  t.in_w = 8;
  cases.push_back({"conv_transpose2d", t});
  // Big enough that the weight gradient gathers its 20 samples in two chunks.
  layer_geometry big;
  big.type = layer_type::conv2d;
  big.in_channels = big.out_channels = 32;
  big.kernel_h = big.kernel_w = 3;
  big.pad_h = big.pad_w = 1;
  big.in_h = big.in_w = 16;
  const std::size_t n = 20;
  cases.push_back({"conv2d 32->32 3x3 16x16", big});
  for (const auto& ak : ptq_layers_test::available_kernels()) {
    ptq::kernels::kernel_set ref = ak.set;
    ref.gemm = ak.fused ? &ptq::kernels::gemm_ref_fused : &ptq::kernels::gemm_ref_unfused;
    for (const auto& cs : cases) {
      INFO(cs.name << " arch " << ak.set.arch_name);
      ptq::layer_compute base(cs.g, 1, ref);
      const auto x = random_floats(n * base.input_size(), rng);
      const auto w = random_floats(base.weight_size(), rng);
      const auto b = random_floats(cs.g.out_channels, rng);
      const auto dy = random_floats(n * base.output_size(), rng);
      std::vector<float> y0(n * base.output_size()), dw0(base.weight_size());
      REQUIRE(base.forward(x.data(), n, w.data(), b.data(), y0.data()).ok());
      REQUIRE(base.weight_grad(x.data(), n, dy.data(), dw0.data()).ok());
      ptq::layer_compute lc(cs.g, 1, ak.set);
      for (const unsigned threads : {1u, 2u, 3u, 0u, 1u}) {
        INFO("threads " << threads);
        lc.set_threads(threads);
        std::vector<float> y(y0.size(), -1.0f), dw(dw0.size(), -1.0f);
        // Twice: the second call reuses the workspaces of the first.
        for (int rep = 0; rep < 2; ++rep) {
          REQUIRE(lc.forward(x.data(), n, w.data(), b.data(), y.data()).ok());
          REQUIRE(lc.weight_grad(x.data(), n, dy.data(), dw.data()).ok());
          REQUIRE(same_bits(y, y0));
          REQUIRE(same_bits(dw, dw0));
        }
      }
      // A smaller minibatch after a larger one.
      std::vector<float> y5(5 * base.output_size()), y5ref(y5.size());
      REQUIRE(lc.forward(x.data(), 5, w.data(), b.data(), y5.data()).ok());
      REQUIRE(base.forward(x.data(), 5, w.data(), b.data(), y5ref.data()).ok());
      REQUIRE(same_bits(y5, y5ref));
    }
  }
}

TEST_CASE("a Conv2d gives the same bits run per sample or with the samples side by side",
          "[layers]") {
  // 20 samples of 32x3x3 over 16x16 exceed the batched forward's budget: one GEMM per sample.
  // One sample at a time fits it: one GEMM over the (single) sample. Same sums, same bits.
  layer_geometry g;
  g.type = layer_type::conv2d;
  g.in_channels = g.out_channels = 32;
  g.kernel_h = g.kernel_w = 3;
  g.pad_h = g.pad_w = 1;
  g.in_h = g.in_w = 16;
  const std::size_t n = 20;
  std::mt19937 rng(5);
  ptq::layer_compute lc(g);
  const auto x = random_floats(n * lc.input_size(), rng);
  const auto w = random_floats(lc.weight_size(), rng);
  const auto b = random_floats(g.out_channels, rng);
  std::vector<float> all(n * lc.output_size()), one(n * lc.output_size());
  REQUIRE(lc.forward(x.data(), n, w.data(), b.data(), all.data()).ok());
  for (std::size_t s = 0; s < n; ++s) {
    REQUIRE(lc.forward(x.data() + s * lc.input_size(), 1, w.data(), b.data(),
                       one.data() + s * lc.output_size())
                .ok());
  }
  CHECK(same_bits(all, one));
}

TEST_CASE("a depthwise Conv2d: the direct kernels give the im2col + GEMM path's bits",
          "[layers][depthwise]") {
  struct dw_case {
    std::string name;
    layer_geometry g;
  };
  std::vector<dw_case> cases;
  layer_geometry d;
  d.type = layer_type::conv2d;
  d.in_channels = d.out_channels = d.groups = 20;  // not a whole number of 8-channel blocks
  d.kernel_h = d.kernel_w = 3;
  d.pad_h = d.pad_w = 1;
  d.in_h = 12;
  d.in_w = 11;
  cases.push_back({"3x3 padding 1", d});
  layer_geometry s = d;
  s.stride_h = 2;
  s.stride_w = 3;
  s.dilation_h = s.dilation_w = 2;
  s.pad_h = 2;
  s.pad_w = 0;
  cases.push_back({"3x3 strides 2, 3, dilation 2", s});
  layer_geometry r = d;
  r.kernel_h = 5;
  r.kernel_w = 1;
  r.pad_h = 3;
  r.pad_w = 0;
  cases.push_back({"5x1, padding wider than half the kernel", r});
  layer_geometry odd = d;  // a block of 7 lanes: groups of four and three
  odd.in_channels = odd.out_channels = odd.groups = 7;
  cases.push_back({"7 channels", odd});
  layer_geometry big = d;  // enough samples that the GEMM path's weight gradient is chunked
  big.in_channels = big.out_channels = big.groups = 64;
  big.in_h = big.in_w = 32;
  cases.push_back({"64 channels 3x3 over 32x32", big});
  std::mt19937 rng(29);
  const std::size_t n = 12;
  for (const auto& ak : ptq_layers_test::available_kernels()) {
    ptq::kernels::kernel_set gemm_path = ak.set;
    gemm_path.depthwise_forward = nullptr;
    gemm_path.depthwise_weight_grad = nullptr;
    for (const auto& cs : cases) {
      for (const bool zeros : {false, true}) {  // zeros: signed zeros through the padding
        INFO(cs.name << " arch " << ak.set.arch_name << (zeros ? ", zero input, bias -0" : ""));
        ptq::layer_compute base(cs.g, 1, gemm_path);
        auto x = random_floats(n * base.input_size(), rng);
        const auto w = random_floats(base.weight_size(), rng);
        auto b = random_floats(cs.g.out_channels, rng);
        const auto dy = random_floats(n * base.output_size(), rng);
        if (zeros) {
          std::fill(x.begin(), x.end(), 0.0f);
          std::fill(b.begin(), b.end(), -0.0f);
        }
        std::vector<float> y0(n * base.output_size()), dw0(base.weight_size());
        REQUIRE(base.forward(x.data(), n, w.data(), b.data(), y0.data()).ok());
        REQUIRE(base.weight_grad(x.data(), n, dy.data(), dw0.data()).ok());
        std::vector<float> y0_nobias(y0.size());
        REQUIRE(base.forward(x.data(), n, w.data(), nullptr, y0_nobias.data()).ok());
        ptq::layer_compute lc(cs.g, 1, ak.set);
        for (const unsigned threads : {1u, 2u, 3u}) {
          INFO("threads " << threads);
          lc.set_threads(threads);
          std::vector<float> y(y0.size(), -1.0f), dw(dw0.size(), -1.0f), yn(y0.size(), -1.0f);
          REQUIRE(lc.forward(x.data(), n, w.data(), b.data(), y.data()).ok());
          REQUIRE(lc.weight_grad(x.data(), n, dy.data(), dw.data()).ok());
          REQUIRE(lc.forward(x.data(), n, w.data(), nullptr, yn.data()).ok());
          REQUIRE(same_bits(y, y0));
          REQUIRE(same_bits(dw, dw0));
          REQUIRE(same_bits(yn, y0_nobias));
        }
      }
    }
  }
  // The scalar references equal the unfused GEMM path too.
  ptq::kernels::kernel_set ref = ptq::kernels::reference_kernel_set();
  ptq::kernels::kernel_set ref_gemm = ref;
  ref_gemm.depthwise_forward = nullptr;
  ref_gemm.depthwise_weight_grad = nullptr;
  ptq::layer_compute a(d, 1, ref), g(d, 1, ref_gemm);
  const auto x = random_floats(n * a.input_size(), rng);
  const auto w = random_floats(a.weight_size(), rng);
  const auto dy = random_floats(n * a.output_size(), rng);
  std::vector<float> ya(n * a.output_size()), yg(ya.size()), da(a.weight_size()), dg(da.size());
  REQUIRE(a.forward(x.data(), n, w.data(), nullptr, ya.data()).ok());
  REQUIRE(g.forward(x.data(), n, w.data(), nullptr, yg.data()).ok());
  REQUIRE(a.weight_grad(x.data(), n, dy.data(), da.data()).ok());
  REQUIRE(g.weight_grad(x.data(), n, dy.data(), dg.data()).ok());
  CHECK(same_bits(ya, yg));
  CHECK(same_bits(da, dg));
}

TEST_CASE("layer with no samples: empty output, zero gradient", "[layers]") {
  for (const auto& c : accuracy_cases()) {
    INFO(c.name);
    ptq::layer_compute lc(c.g);
    std::vector<float> w(lc.weight_size(), 1.0f), dw(lc.weight_size(), 7.0f);
    const float x = 0.0f;
    float y = 3.0f;
    REQUIRE(lc.forward(&x, 0, w.data(), nullptr, &y).ok());
    CHECK(y == 3.0f);
    REQUIRE(lc.weight_grad(&x, 0, &x, dw.data()).ok());
    CHECK(dw == std::vector<float>(dw.size(), 0.0f));
  }
}

TEST_CASE("layer geometry errors", "[layers]") {
  using ptq::errc;
  const auto base = accuracy_cases();
  struct bad {
    const char* what;
    layer_geometry g;
    errc code;
    const char* message;
  };
  std::vector<bad> cases;
  auto conv = base[1].g, tconv = base[3].g, lin = base[0].g;
  auto g = conv;
  g.type = layer_type::conv3d;
  cases.push_back({"unsupported type", g, errc::invalid_argument,
                   "Conv3d geometry: only Linear, Conv2d and ConvTranspose2d"});
  g = lin;
  g.in_channels = 0;
  cases.push_back({"linear without inputs", g, errc::invalid_argument,
                   "Linear geometry: in_channels (0) and out_channels (19) must be positive"});
  g = conv;
  g.groups = 3;
  cases.push_back({"groups not dividing", g, errc::shape_mismatch,
                   "Conv2d geometry: groups (3) must divide in_channels (4) and out_channels (6)"});
  g = tconv;
  g.groups = 4;
  cases.push_back({"groups not dividing cout", g, errc::shape_mismatch,
                   "ConvTranspose2d geometry: groups (4) must divide in_channels (4) and "
                   "out_channels (6)"});
  g = conv;
  g.groups = 0;
  cases.push_back(
      {"zero groups", g, errc::invalid_argument, "Conv2d geometry: groups must be positive"});
  g = conv;
  g.stride_w = 0;
  cases.push_back({"zero stride", g, errc::invalid_argument,
                   "Conv2d geometry: kernel size, stride and dilation must be positive"});
  g = conv;
  g.kernel_h = 0;
  cases.push_back({"zero kernel", g, errc::invalid_argument,
                   "Conv2d geometry: kernel size, stride and dilation must be positive"});
  g = conv;
  g.in_w = 0;
  cases.push_back(
      {"empty input", g, errc::invalid_argument, "Conv2d geometry: input size 9x0 is empty"});
  g = conv;
  g.pad_h = 0;
  g.in_h = 4;  // dilated kernel spans 5 > 4
  cases.push_back({"kernel larger than input", g, errc::shape_mismatch,
                   "Conv2d geometry: output size 0x5 is not positive (input 4x11, kernel 3x3)"});
  g = conv;
  g.output_padding_h = 1;
  cases.push_back({"output_padding on conv2d", g, errc::invalid_argument,
                   "Conv2d geometry: output_padding is for ConvTranspose2d only"});
  g = tconv;
  g.output_padding_w = 2;  // stride 2, dilation 1
  cases.push_back({"output_padding too large", g, errc::invalid_argument,
                   "ConvTranspose2d geometry: output_padding (1, 2) must be smaller than either "
                   "stride or dilation"});
  g = tconv;
  g.pad_h = 6;
  cases.push_back({"transpose output not positive", g, errc::shape_mismatch,
                   "ConvTranspose2d geometry: output size 0x8 is not positive (input 5x4, kernel "
                   "3x3)"});
  for (const auto& c : cases) {
    INFO(c.what);
    const auto s = ptq::validate_geometry(c.g);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == c.code);
    CHECK(s.error().message == c.message);
    ptq::layer_compute lc(c.g);
    CHECK_FALSE(lc.status().ok());
    float buf[4] = {};
    const auto f = lc.forward(buf, 1, buf, nullptr, buf);
    REQUIRE_FALSE(f.ok());
    CHECK(f.error().message == c.message);
    REQUIRE_FALSE(lc.weight_grad(buf, 1, buf, buf).ok());
  }
  // output_padding >= stride is fine while it is below the dilation (PyTorch accepts it).
  g = tconv;
  g.stride_h = 1;
  g.dilation_h = 2;
  g.output_padding_h = 1;
  CHECK(ptq::validate_geometry(g).ok());
}

TEST_CASE(
    "bound samples: forward_bound and weight_grad_bound give the bits of the samples "
    "gathered",
    "[layers]") {
  std::mt19937 rng(29);
  std::vector<named_geometry> cases = accuracy_cases();
  layer_geometry big;  // the weight gradient reads the bound planes over two chunks
  big.type = layer_type::conv2d;
  big.in_channels = big.out_channels = 32;
  big.kernel_h = big.kernel_w = 3;
  big.pad_h = big.pad_w = 1;
  big.in_h = big.in_w = 16;
  cases.push_back({"conv2d 32->32 3x3 16x16", big});
  layer_geometry dw = big;
  dw.groups = 32;
  cases.push_back({"depthwise 32 3x3", dw});
  const std::size_t n = 20;
  for (const auto& ak : ptq_layers_test::available_kernels()) {
    for (const auto& cs : cases) {
      INFO(cs.name << " arch " << ak.set.arch_name);
      ptq::layer_compute lc(cs.g, 1, ak.set);
      const std::size_t in = lc.input_size();
      const auto w = random_floats(lc.weight_size(), rng);
      const auto b = random_floats(cs.g.out_channels, rng);
      const auto dy = random_floats(n * lc.output_size(), rng);
      // Bound twice: 26 samples, then 23 others (a rebind replaces the planes).
      for (const std::size_t bound : {std::size_t{26}, std::size_t{23}}) {
        const auto x = random_floats(bound * in, rng);
        std::vector<std::size_t> index(n);
        std::vector<float> gathered(n * in);
        for (std::size_t s = 0; s < n; ++s) {  // shuffled, with repeats
          index[s] = std::uniform_int_distribution<std::size_t>(0, bound - 1)(rng);
          std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(index[s] * in), in,
                      gathered.begin() + static_cast<std::ptrdiff_t>(s * in));
        }
        std::vector<float> y0(n * lc.output_size()), dw0(lc.weight_size());
        lc.set_threads(1);
        REQUIRE(lc.forward(gathered.data(), n, w.data(), b.data(), y0.data()).ok());
        REQUIRE(lc.weight_grad(gathered.data(), n, dy.data(), dw0.data()).ok());
        REQUIRE(lc.bind_inputs(x.data(), bound).ok());
        for (const unsigned threads : {1u, 2u, 3u}) {
          INFO("bound " << bound << " threads " << threads);
          lc.set_threads(threads);
          std::vector<float> y(y0.size(), -1.0f), dwb(dw0.size(), -1.0f);
          REQUIRE(lc.forward_bound(index.data(), n, w.data(), b.data(), y.data()).ok());
          REQUIRE(lc.weight_grad_bound(index.data(), n, dy.data(), dwb.data()).ok());
          REQUIRE(same_bits(y, y0));
          REQUIRE(same_bits(dwb, dw0));
        }
        // An unbound call in between reads its own samples, and the binding stays.
        std::vector<float> dwu(dw0.size());
        REQUIRE(lc.weight_grad(gathered.data(), n, dy.data(), dwu.data()).ok());
        REQUIRE(same_bits(dwu, dw0));
        REQUIRE(lc.weight_grad_bound(index.data(), n, dy.data(), dwu.data()).ok());
        REQUIRE(same_bits(dwu, dw0));
      }
    }
  }
}

TEST_CASE("bound samples: an index past the bound samples is an error", "[layers]") {
  const auto cases = accuracy_cases();
  ptq::layer_compute lc(cases[1].g);
  const auto x = std::vector<float>(3 * lc.input_size(), 1.0f);
  std::vector<float> w(lc.weight_size(), 1.0f), y(2 * lc.output_size()), dw(lc.weight_size());
  REQUIRE(lc.bind_inputs(x.data(), 3).ok());
  const std::size_t index[] = {2, 3};
  const auto f = lc.forward_bound(index, 2, w.data(), nullptr, y.data());
  REQUIRE_FALSE(f.ok());
  CHECK(f.error().code == ptq::errc::out_of_range);
  CHECK(f.error().message == "layer_compute: sample index 3 is not one of the 3 bound samples");
  REQUIRE_FALSE(lc.weight_grad_bound(index, 2, y.data(), dw.data()).ok());
  CHECK(lc.forward_bound(index, 1, w.data(), nullptr, y.data()).ok());
}
