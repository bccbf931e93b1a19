// Layers of the tests' networks that own their tensors (xtensor, so a test can index and change
// them), the ptq::layer_desc views over them that the session takes, and a session made from
// them; tensor values as vectors for comparisons.
#pragma once

#include <xtensor/xarray.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ptq/session/calibration_session.hpp"
#include "ptq/session/layer.hpp"

namespace ptq_test {

/// One layer with its own weight and bias.
struct test_layer {
  std::string name;
  ptq::layer_type type = ptq::layer_type::conv2d;
  xt::xarray<float> weight;
  std::optional<xt::xarray<float>> bias;
  ptq::conv_attributes conv;
  std::optional<ptq::batch_norm_params> batch_norm;
  ptq::activation_desc activation;

  /// The description the session reads (valid while this layer lives, unchanged).
  [[nodiscard]] ptq::layer_desc desc() const {
    ptq::layer_desc d;
    d.name = name;
    d.type = type;
    if (type != ptq::layer_type::avg_pool2d)
      d.weight = ptq::as_tensor_view(weight);
    if (bias)
      d.bias = ptq::as_tensor_view(*bias);
    d.conv = conv;
    d.batch_norm = batch_norm;
    d.activation = activation;
    return d;
  }
};

[[nodiscard]] inline std::vector<ptq::layer_desc> descs(const std::vector<test_layer>& layers) {
  std::vector<ptq::layer_desc> out;
  for (const auto& l : layers)
    out.push_back(l.desc());
  return out;
}

/// A session over `layers` (which need to live only while it is created).
[[nodiscard]] inline ptq::result<ptq::calibration_session> create(
    const ptq::amct_config& config, const std::vector<test_layer>& layers,
    ptq::session_options options = {}) {
  return ptq::calibration_session::create(config, descs(layers), std::move(options));
}

/// A tensor's values in C order, to compare.
[[nodiscard]] inline std::vector<float> values(const ptq::tensor_view& v) {
  return ptq::copy_values(v);
}
[[nodiscard]] inline std::vector<float> values(const xt::xarray<float>& x) {
  return std::vector<float>(x.begin(), x.end());
}

/// The value at `index` (one per axis) of a view.
[[nodiscard]] inline float value_at(const ptq::tensor_view& v,
                                    const std::vector<std::size_t>& index) {
  std::size_t flat = 0;
  for (std::size_t a = 0; a < index.size(); ++a)
    flat = flat * v.shape[a] + index[a];
  return v.at(flat);
}

}  // namespace ptq_test
