// The README's AdaRound example: the learned rounding of a Linear layer followed by a ReLU, from
// its float weight and input samples. README.md shows the region between the [readme:...]
// markers, and tests/package checks that it is this text.
// [readme:adaround]
#include <ptq/algorithms/weights/ada.hpp>

#include <iostream>
#include <vector>

// A Linear 16 -> 8 layer with a ReLU after it: weight [8, 16], bias [8], and `samples` inputs
// [samples, 16] from the calibration data.
int adaround_linear(const std::vector<float>& weight, const std::vector<float>& bias,
                    const std::vector<float>& inputs, std::size_t samples) {
  ptq::ada_problem p;  // the float output of p.input is the target unless p.target is given
  p.name = "fc";
  p.geometry.type = ptq::layer_type::linear;
  p.geometry.in_channels = 16;
  p.geometry.out_channels = 8;
  p.weight = weight.data();
  p.bias = bias.data();
  p.activation.kind = ptq::activation_kind::relu;
  p.input = inputs.data();
  p.samples = samples;

  ptq::ada_settings s;  // num_iteration, reg_param, beta range, warm_start, seed
  s.num_iteration = 200;
  s.channel_wise = false;  // Linear's default
  const auto r = ptq::ada_round(p, s);
  if (!r) {
    std::cerr << ptq::format_error(r.error()) << '\n';
    return 1;
  }
  // r.value().weight: the fake-quantized weight; r.value().params: scale_w (KL), offset_w 0
  std::cout << "scale_w " << r.value().params.scale[0] << ", " << r.value().changed
            << " weights rounded away from the nearest grid point\n";
  return 0;
}
// [/readme:adaround]

#include <random>

int main() {
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> weight(8 * 16), bias(8), inputs(256 * 16);
  for (float& x : weight)
    x = 0.3f * normal(gen);
  for (float& x : bias)
    x = 0.1f * normal(gen);
  for (float& x : inputs)
    x = normal(gen);
  return adaround_linear(weight, bias, inputs, 256);
}
