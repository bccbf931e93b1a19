// The reference forward pass of a sequential manifest (ptq/session/sequential_forward.hpp) on a
// hand-derived three-layer model, the inputs it refuses, and the session's phases driven on it
// (sequential_calibration.hpp). The digits model through both is test_digits.cpp.
#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

#include "ptq/config.hpp"
#include "ptq/session/sequential_calibration.hpp"
#include "ptq/session/sequential_forward.hpp"

namespace {

ptq::manifest_layer layer(const std::string& name, ptq::layer_type type) {
  ptq::manifest_layer m;
  m.desc.name = name;
  m.desc.type = type;
  return m;
}

/// conv: Conv2d 1 -> 2, 2x2 kernels [[1, 2], [3, 4]] and [[-1, 0], [0, 1]], bias [0.5, -1],
/// ReLU; pool: AvgPool2d 2x2; fc: Linear 2 -> 2 on the flattened pool output.
ptq::model_manifest small_model() {
  ptq::model_manifest model;
  auto conv = layer("conv", ptq::layer_type::conv2d);
  conv.set_weight({2, 1, 2, 2}, {1, 2, 3, 4, -1, 0, 0, 1});
  conv.set_bias({0.5f, -1.0f});
  conv.desc.activation.kind = ptq::activation_kind::relu;
  auto pool = layer("pool", ptq::layer_type::avg_pool2d);
  pool.kernel_size = {2};
  auto fc = layer("fc", ptq::layer_type::linear);
  fc.set_weight({2, 2}, {1, -1, 0.5f, 0.5f});
  fc.set_bias({0.0f, 1.0f});
  fc.flatten = true;
  model.layers = {conv, pool, fc};
  return model;
}

std::vector<const ptq::layer_desc*> descs_of(const ptq::model_manifest& m) {
  std::vector<const ptq::layer_desc*> v;
  for (const auto& l : m.layers)
    v.push_back(&l.desc);
  return v;
}

const ptq::io::float_tensor image{{1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};

}  // namespace

TEST_CASE("forward_sequential: conv, pool and linear by hand", "[session][forward]") {
  const auto model = small_model();
  std::vector<ptq::io::float_tensor> inputs;
  const auto y = ptq::forward_sequential(model, descs_of(model), image, 1,
                                         [&](std::size_t, ptq::io::float_tensor& x) {
                                           inputs.push_back(x);
                                           return ptq::result<>{};
                                         });
  REQUIRE(y.ok());
  // conv channel 0: 37.5, 47.5, 67.5, 77.5 (windows of the image times 1 2 / 3 4, plus 0.5);
  // channel 1: x[i+1][j+1] - x[i][j] - 1 = 3 everywhere.
  REQUIRE(inputs.size() == 3);
  CHECK(inputs[1].shape == std::vector<std::size_t>{1, 2, 2, 2});
  CHECK(inputs[1].data == std::vector<float>{37.5f, 47.5f, 67.5f, 77.5f, 3, 3, 3, 3});
  CHECK(inputs[2].shape == std::vector<std::size_t>{1, 2});  // pooled 57.5 and 3, flattened
  CHECK(inputs[2].data == std::vector<float>{57.5f, 3.0f});
  CHECK(y.value().shape == std::vector<std::size_t>{1, 2});
  CHECK(y.value().data == std::vector<float>{54.5f, 31.25f});  // 57.5 - 3; 28.75 + 1.5 + 1
  CHECK(ptq::top1_classes(y.value()) == std::vector<int>{0});
  CHECK(ptq::top1_accuracy({0, 1, 1}, {0, 1, 0}) == Approx(2.0 / 3.0));
  CHECK(ptq::top1_accuracy({}, {}) == 0.0);
  const ptq::io::float_tensor three{{3, 2}, {1, 2, 3, 4, 5, 6}};
  const auto r = ptq::batch_rows(three, 1, 3);
  CHECK(r.shape == std::vector<std::size_t>{2, 2});
  CHECK(r.data == std::vector<float>{3, 4, 5, 6});
  CHECK(ptq::batch_rows(three, 2, 9).data == std::vector<float>{5, 6});  // cut to the rows
  CHECK(ptq::batch_rows(three, 5, 9).shape == std::vector<std::size_t>{0, 2});
  CHECK(ptq::top1_classes(ptq::io::float_tensor{{2}, {1, 2}}).empty());  // not [N, K]
  const auto ref = ptq::batch_view(image, "image");
  CHECK(ref.data == image.data.data());
  CHECK(ref.name == "image");
}

TEST_CASE("forward_sequential refuses what it cannot run, naming the layer", "[session][forward]") {
  const auto model = small_model();
  auto descs = descs_of(model);
  SECTION("a description per manifest layer") {
    descs.pop_back();
    const auto y = ptq::forward_sequential(model, descs, image, 1);
    REQUIRE_FALSE(y.ok());
    CHECK(y.error().code == ptq::errc::invalid_argument);
    CHECK(y.error().message == "2 layer descriptions for a manifest of 3 layers");
  }
  SECTION("an input of the wrong channel count") {
    const auto y =
        ptq::forward_sequential(model, descs, ptq::io::float_tensor{{1, 2, 3, 3}, {}}, 1);
    REQUIRE_FALSE(y.ok());
    CHECK(y.error().code == ptq::errc::shape_mismatch);
    CHECK(y.error().message == "conv input [1, 2, 3, 3]: expected [N, 1, H, W]");
  }
  SECTION("a pooling window larger than its input") {
    ptq::model_manifest pool_only;
    pool_only.layers = {model.layers[1]};
    const auto y = ptq::forward_sequential(pool_only, descs_of(pool_only),
                                           ptq::io::float_tensor{{1, 1, 1, 1}, {1}}, 1);
    REQUIRE_FALSE(y.ok());
    CHECK(y.error().code == ptq::errc::shape_mismatch);
    CHECK(y.error().message == "pool input [1, 1, 1, 1]: the pooling window does not fit");
  }
  SECTION("a BatchNorm that is not one value per channel") {
    auto other = model;
    other.layers[0].desc.batch_norm = ptq::batch_norm_params{{1}, {0}, {0}, {1}, 1e-5f};
    const auto y = ptq::forward_sequential(other, descs_of(other), image, 1);
    REQUIRE_FALSE(y.ok());
    CHECK(y.error().code == ptq::errc::shape_mismatch);
    CHECK(y.error().message == "conv: its BatchNorm has 1 values for 2 channels");
  }
  SECTION("a description the session would refuse") {
    auto other = model;
    other.layers[2].set_bias({1.0f, 2.0f, 3.0f});
    const auto y = ptq::forward_sequential(other, descs_of(other), image, 1);
    REQUIRE_FALSE(y.ok());
    CHECK(y.error().code == ptq::errc::session_layer_invalid);
    CHECK(y.error().message == "layer 'fc': bias has 3 values; Cout is 2");
  }
  SECTION("an empty batch runs through") {
    const auto y =
        ptq::forward_sequential(model, descs, ptq::io::float_tensor{{0, 1, 3, 3}, {}}, 1);
    REQUIRE(y.ok());
    CHECK(y.value().shape == std::vector<std::size_t>{0, 2});
  }
  SECTION("a layer type it does not run") {
    auto other = model;
    other.layers[0].desc.type = ptq::layer_type::conv1d;
    const auto y = ptq::forward_sequential(other, descs_of(other), image, 1);
    REQUIRE_FALSE(y.ok());
    CHECK(y.error().code == ptq::errc::invalid_argument);
    CHECK(y.error().message ==
          "conv: the sequential forward runs Conv2d, Linear and AvgPool2d only");
  }
  SECTION("a hook's error stops the pass") {
    std::size_t seen = 0;
    const auto y = ptq::forward_sequential(
        model, descs, image, 1, [&](std::size_t i, ptq::io::float_tensor&) -> ptq::result<> {
          ++seen;
          if (i == 1)
            return ptq::make_error(ptq::errc::session_input_invalid, "stop at pool");
          return {};
        });
    REQUIRE_FALSE(y.ok());
    CHECK(y.error().message == "stop at pool");
    CHECK(seen == 2);
  }
}

TEST_CASE("calibrate_sequential drives the phases; too few images is an error",
          "[session][forward]") {
  const auto model = small_model();
  std::vector<ptq::layer_desc> descs;
  for (const auto& l : model.layers)
    descs.push_back(l.desc);
  const auto config = ptq::try_parse_config("batch_num : 3\n");
  REQUIRE(config.ok());
  auto created = ptq::calibration_session::create(config.value(), descs);
  REQUIRE(created.ok());
  auto s = std::move(created).value();
  ptq::io::float_tensor calib{{2, 1, 3, 3}, std::vector<float>(18)};
  for (std::size_t i = 0; i < calib.data.size(); ++i)
    calib.data[i] = static_cast<float>(i % 7) - 2.0f;
  const auto few = ptq::calibrate_sequential(s, model, calib, 1, 1);
  REQUIRE_FALSE(few.ok());
  CHECK(few.error().code == ptq::errc::session_input_invalid);
  CHECK(few.error().message == "batch_num 3 x 1 needs more calibration images than the 2 given");
  calib.shape[0] = 3;
  calib.data.insert(calib.data.end(), image.data.begin(), image.data.end());
  REQUIRE(ptq::calibrate_sequential(s, model, calib, 1, 1).ok());
  const auto record = s.record();
  REQUIRE(record.ok());
  CHECK(record.value().records.size() == 3);
  const auto q = ptq::forward_quantized(s, model, image, 1, ptq::kernels::reference_kernel_set());
  REQUIRE(q.ok());
  CHECK(q.value().logits.shape == std::vector<std::size_t>{1, 2});
  REQUIRE(q.value().activation_sqnr_db.size() == 3);
  for (const double db : q.value().activation_sqnr_db)
    CHECK(db > 20.0);  // every layer quantized, 8 bits
}
