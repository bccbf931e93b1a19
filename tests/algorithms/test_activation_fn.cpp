// Activations of AdaRound groups: exact values at chosen points and at the kinks (PyTorch's
// derivative conventions), forward against double-precision formulas, backward against central
// finite differences of those formulas, PReLU per channel, in-place use, and errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "ptq/algorithms/layer/activation_fn.hpp"

namespace {

using ptq::activation_desc;
using ptq::activation_kind;

activation_desc desc(activation_kind k) {
  activation_desc a;
  a.kind = k;
  return a;
}

activation_desc gelu(bool tanh_form) {
  activation_desc a = desc(activation_kind::gelu);
  a.gelu_tanh = tanh_form;
  return a;
}

float fwd(const activation_desc& a, float z) {
  float y = std::numeric_limits<float>::quiet_NaN();
  REQUIRE(ptq::activation_forward(a, &z, &y, 1, 1, 1));
  return y;
}

float bwd(const activation_desc& a, float z, float dy = 1.0f) {
  float dz = std::numeric_limits<float>::quiet_NaN();
  REQUIRE(ptq::activation_backward(a, &z, &dy, &dz, 1, 1, 1));
  return dz;
}

/// The activations in double, written from their definitions.
double ref(const activation_desc& a, double z) {
  const double pi = 3.14159265358979323846;
  switch (a.kind) {
    case activation_kind::none:
      return z;
    case activation_kind::relu:
      return z > 0 ? z : 0.0;
    case activation_kind::relu6:
      return z < 0 ? 0.0 : (z > 6 ? 6.0 : z);
    case activation_kind::sigmoid:
      return 1.0 / (1.0 + std::exp(-z));
    case activation_kind::tanh:
      return std::tanh(z);
    case activation_kind::leaky_relu:
      return z > 0 ? z : a.negative_slope * z;
    case activation_kind::prelu:
      return z > 0 ? z : a.prelu_weight[0] * z;
    case activation_kind::rrelu:
      return z > 0 ? z : 0.5 * (static_cast<double>(a.rrelu_lower) + a.rrelu_upper) * z;
    case activation_kind::gelu:
      if (a.gelu_tanh)
        return 0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (z + 0.044715 * z * z * z)));
      return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));
  }
  return 0.0;
}

std::vector<activation_desc> all_kinds() {
  activation_desc leaky = desc(activation_kind::leaky_relu);
  leaky.negative_slope = 0.2f;
  activation_desc prelu = desc(activation_kind::prelu);
  prelu.prelu_weight = {-0.3f};
  return {desc(activation_kind::none),
          desc(activation_kind::relu),
          desc(activation_kind::relu6),
          desc(activation_kind::sigmoid),
          desc(activation_kind::tanh),
          leaky,
          prelu,
          gelu(false),
          gelu(true),
          desc(activation_kind::rrelu)};
}

}  // namespace

TEST_CASE("activations: exact values and kinks", "[ada][activation]") {
  const activation_desc relu = desc(activation_kind::relu);
  CHECK(fwd(relu, -1.5f) == 0.0f);
  CHECK(fwd(relu, 2.5f) == 2.5f);
  CHECK(fwd(relu, 0.0f) == 0.0f);
  CHECK_FALSE(std::signbit(fwd(relu, -0.0f)));                            // -0 becomes +0
  CHECK(std::isnan(fwd(relu, std::numeric_limits<float>::quiet_NaN())));  // NaN propagates
  CHECK_FALSE(std::signbit(fwd(relu, -1.5f)));  // +0, not -0, for a negative input
  CHECK(fwd(relu, 1e-45f) == 1e-45f);           // a subnormal is kept
  CHECK_FALSE(std::signbit(fwd(relu, -1e-45f)));
  CHECK(fwd(relu, std::numeric_limits<float>::infinity()) ==
        std::numeric_limits<float>::infinity());
  CHECK(fwd(relu, -std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(std::isnan(fwd(relu, -std::numeric_limits<float>::quiet_NaN())));
  CHECK(bwd(relu, 0.0f) == 0.0f);  // ReLU'(0) = 0 (threshold_backward: z <= 0)
  CHECK(bwd(relu, 1e-30f, 3.0f) == 3.0f);
  CHECK(bwd(relu, -1e-30f, 3.0f) == 0.0f);

  const activation_desc relu6 = desc(activation_kind::relu6);
  CHECK(fwd(relu6, -2.0f) == 0.0f);
  CHECK(fwd(relu6, 3.25f) == 3.25f);
  CHECK(fwd(relu6, 6.0f) == 6.0f);
  CHECK(fwd(relu6, 7.5f) == 6.0f);
  CHECK(bwd(relu6, 0.0f) == 0.0f);  // 1 only on the open interval (0, 6)
  CHECK(bwd(relu6, 6.0f) == 0.0f);
  CHECK(bwd(relu6, 3.0f, 2.0f) == 2.0f);
  CHECK(bwd(relu6, std::nextafter(6.0f, 0.0f)) == 1.0f);
  CHECK(bwd(relu6, 6.5f) == 0.0f);

  activation_desc leaky = desc(activation_kind::leaky_relu);
  leaky.negative_slope = 0.1f;
  CHECK(fwd(leaky, -2.0f) == -2.0f * 0.1f);
  CHECK(fwd(leaky, 2.0f) == 2.0f);
  CHECK(bwd(leaky, 0.0f) == 0.1f);  // LeakyReLU'(0) = slope (leaky_relu_backward: z > 0)
  CHECK(bwd(leaky, 0.5f, 4.0f) == 4.0f);
  CHECK(bwd(leaky, -0.5f, 4.0f) == 4.0f * 0.1f);

  activation_desc rrelu = desc(activation_kind::rrelu);  // defaults 1/8, 1/3
  const auto slope = static_cast<float>((static_cast<double>(1.0f / 8.0f) + (1.0f / 3.0f)) / 2.0);
  CHECK(ptq::rrelu_eval_slope(rrelu) == slope);
  CHECK(fwd(rrelu, -3.0f) == -3.0f * slope);
  CHECK(bwd(rrelu, 0.0f) == slope);
  rrelu.rrelu_lower = rrelu.rrelu_upper = 0.25f;
  CHECK(fwd(rrelu, -4.0f) == -1.0f);

  const activation_desc sig = desc(activation_kind::sigmoid);
  CHECK(fwd(sig, 0.0f) == 0.5f);
  CHECK(bwd(sig, 0.0f) == 0.25f);
  CHECK(fwd(sig, -200.0f) == 0.0f);  // exp overflows to inf: 1 / inf
  CHECK(fwd(sig, 200.0f) == 1.0f);
  CHECK(bwd(sig, 200.0f) == 0.0f);

  const activation_desc th = desc(activation_kind::tanh);
  CHECK(fwd(th, 0.0f) == 0.0f);
  CHECK(bwd(th, 0.0f, 5.0f) == 5.0f);
  CHECK(fwd(th, 50.0f) == 1.0f);

  for (bool t : {false, true}) {
    CHECK(fwd(gelu(t), 0.0f) == 0.0f);
    CHECK(bwd(gelu(t), 0.0f) == 0.5f);
    CHECK(fwd(gelu(t), 20.0f) == 20.0f);
    CHECK(fwd(gelu(t), -20.0f) == Approx(0.0f).margin(1e-30));
  }
  // Φ(1) = 0.841344746068543: GELU(1) = Φ(1) with the erf form.
  CHECK(fwd(gelu(false), 1.0f) == Approx(0.841344746068543).epsilon(2e-7));
  CHECK(fwd(gelu(true), 1.0f) == Approx(ref(gelu(true), 1.0)).epsilon(2e-7));
  CHECK(fwd(gelu(true), 1.0f) != fwd(gelu(false), 1.0f));

  const activation_desc none = desc(activation_kind::none);
  CHECK(fwd(none, -7.25f) == -7.25f);
  CHECK(bwd(none, -7.25f, 0.5f) == 0.5f);
}

TEST_CASE("activations: forward against double formulas", "[ada][activation]") {
  for (const auto& a : all_kinds()) {
    INFO(std::string(ptq::to_string(a.kind)) << (a.gelu_tanh ? " (tanh)" : ""));
    std::vector<float> z;
    for (float v = -9.0f; v <= 9.0f; v += 0.0371f)
      z.push_back(v);
    std::vector<float> y(z.size());
    REQUIRE(ptq::activation_forward(a, z.data(), y.data(), 1, 1, z.size()));
    for (std::size_t i = 0; i < z.size(); ++i) {
      INFO("z = " << z[i]);
      const double r = ref(a, static_cast<double>(z[i]));
      CHECK(static_cast<double>(y[i]) == Approx(r).epsilon(1e-6).margin(1e-7));
    }
  }
}

TEST_CASE("activations: backward against central finite differences", "[ada][activation]") {
  const double h = 1e-5;
  for (const auto& a : all_kinds()) {
    INFO(std::string(ptq::to_string(a.kind)) << (a.gelu_tanh ? " (tanh)" : ""));
    std::vector<float> z;
    std::vector<float> dy;
    // The grid avoids the kinks (0 and 6) by far more than h.
    for (float v = -8.987f; v <= 9.0f; v += 0.0371f) {
      z.push_back(v);
      dy.push_back(0.5f + 0.25f * static_cast<float>(z.size() % 5));
    }
    std::vector<float> dz(z.size());
    REQUIRE(ptq::activation_backward(a, z.data(), dy.data(), dz.data(), 1, 1, z.size()));
    for (std::size_t i = 0; i < z.size(); ++i) {
      const double zd = z[i];
      const double fd = (ref(a, zd + h) - ref(a, zd - h)) / (2.0 * h);
      INFO("z = " << z[i]);
      CHECK(static_cast<double>(dz[i]) == Approx(dy[i] * fd).epsilon(1e-5).margin(2e-6));
    }
  }
}

TEST_CASE("activations: PReLU per channel on axis 1", "[ada][activation]") {
  // n = 2, C = 3, spatial = 4: element (b, c, s) at (b·3 + c)·4 + s uses weight c.
  activation_desc a = desc(activation_kind::prelu);
  a.prelu_weight = {0.1f, -0.5f, 2.0f};
  const std::size_t n = 2, c = 3, s = 4;
  std::vector<float> z(n * c * s);
  for (std::size_t i = 0; i < z.size(); ++i)
    z[i] = static_cast<float>(i % 3) - 1.0f - 0.25f * static_cast<float>(i % 2);
  std::vector<float> y(z.size()), dz(z.size());
  const std::vector<float> dy(z.size(), 3.0f);
  REQUIRE(ptq::activation_forward(a, z.data(), y.data(), n, c, s));
  REQUIRE(ptq::activation_backward(a, z.data(), dy.data(), dz.data(), n, c, s));
  for (std::size_t b = 0; b < n; ++b) {
    for (std::size_t ch = 0; ch < c; ++ch) {
      for (std::size_t e = 0; e < s; ++e) {
        const std::size_t i = (b * c + ch) * s + e;
        const float w = a.prelu_weight[ch];
        CHECK(y[i] == (z[i] > 0.0f ? z[i] : w * z[i]));
        CHECK(dz[i] == (z[i] > 0.0f ? 3.0f : 3.0f * w));  // PReLU'(0) = weight
      }
    }
  }
  // One weight is shared by every channel.
  a.prelu_weight = {0.25f};
  REQUIRE(ptq::activation_forward(a, z.data(), y.data(), n, c, s));
  for (std::size_t i = 0; i < z.size(); ++i)
    CHECK(y[i] == (z[i] > 0.0f ? z[i] : 0.25f * z[i]));
  // Linear layout [N, C] is spatial 1.
  a.prelu_weight = {0.1f, -0.5f, 2.0f};
  const std::vector<float> zl = {-1.0f, -1.0f, -1.0f, 1.0f, 0.0f, -2.0f};
  std::vector<float> yl(zl.size());
  REQUIRE(ptq::activation_forward(a, zl.data(), yl.data(), 2, 3, 1));
  CHECK(yl == std::vector<float>{-0.1f, 0.5f, -2.0f, 1.0f, 0.0f, -4.0f});
}

TEST_CASE("activations: in place", "[ada][activation]") {
  for (const auto& a : all_kinds()) {
    std::vector<float> z = {-3.0f, -0.5f, 0.0f, 0.75f, 4.0f, 8.0f};
    std::vector<float> y(z.size());
    REQUIRE(ptq::activation_forward(a, z.data(), y.data(), 1, 1, z.size()));
    std::vector<float> inplace = z;
    REQUIRE(ptq::activation_forward(a, inplace.data(), inplace.data(), 1, 1, z.size()));
    CHECK(inplace == y);
    const std::vector<float> dy = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
    std::vector<float> dz(z.size());
    REQUIRE(ptq::activation_backward(a, z.data(), dy.data(), dz.data(), 1, 1, z.size()));
    std::vector<float> g = dy;
    REQUIRE(ptq::activation_backward(a, z.data(), g.data(), g.data(), 1, 1, z.size()));
    CHECK(g == dz);
  }
}

TEST_CASE("activations: errors", "[ada][activation]") {
  activation_desc p = desc(activation_kind::prelu);
  CHECK(ptq::check_activation(p, 3).error().message ==
        "PReLU: weight has 0 values, expected 1 or 3 (channels)");
  p.prelu_weight = {0.1f, 0.2f};
  auto st = ptq::check_activation(p, 3);
  REQUIRE_FALSE(st);
  CHECK(st.error().code == ptq::errc::invalid_argument);
  CHECK(st.error().message == "PReLU: weight has 2 values, expected 1 or 3 (channels)");
  CHECK(ptq::check_activation(p, 2));
  // Nothing is written when the description is invalid.
  std::vector<float> z(6, -1.0f), y(6, 42.0f);
  CHECK_FALSE(ptq::activation_forward(p, z.data(), y.data(), 2, 3, 1));
  CHECK_FALSE(ptq::activation_backward(p, z.data(), z.data(), y.data(), 2, 3, 1));
  CHECK(y == std::vector<float>(6, 42.0f));
  p.prelu_weight = {0.1f, std::numeric_limits<float>::infinity()};
  CHECK(ptq::check_activation(p, 2).error().message == "PReLU: weight 1 is not finite");

  activation_desc l = desc(activation_kind::leaky_relu);
  l.negative_slope = std::numeric_limits<float>::quiet_NaN();
  CHECK(ptq::check_activation(l, 1).error().message == "LeakyReLU: negative_slope is not finite");
  CHECK(ptq::check_activation(desc(activation_kind::relu), 1));  // its slope field is unused

  activation_desc r = desc(activation_kind::rrelu);
  r.rrelu_lower = 0.5f;
  r.rrelu_upper = 0.25f;
  CHECK(ptq::check_activation(r, 1).error().message == "RReLU: lower is greater than upper");
  r.rrelu_upper = std::numeric_limits<float>::infinity();
  CHECK(ptq::check_activation(r, 1).error().message == "RReLU: lower/upper are not finite");

  auto bogus = desc(static_cast<activation_kind>(200));
  CHECK(ptq::check_activation(bogus, 1).error().message == "unknown activation kind");
  CHECK(ptq::to_string(activation_kind::gelu) == "GELU");
}
