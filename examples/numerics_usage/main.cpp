// The README's Numerics example: IFMR on one activation tensor's calibration batches and ARQ on
// a Conv2d weight, from the library alone. README.md shows the region between the [readme:...]
// markers, and tests/package checks that it is this text.
// [readme:numerics]
#include <ptq/algorithms.hpp>

#include <iostream>
#include <vector>

// The calibration batches of one activation tensor, and a Conv2d weight [64, 3, 3, 3] in
// PyTorch's layout.
void calibrate(const std::vector<std::vector<float>>& batches, const std::vector<float>& weight) {
  ptq::ifmr_observer obs(ptq::ifmr_settings{});  // or ptq::hfmg_observer(ptq::hfmg_settings{})
  for (const std::vector<float>& batch : batches)
    ptq::throw_if_error(obs.observe(batch));  // every batch before finalize
  const ptq::activation_quant_result act = ptq::value_or_throw(obs.finalize());
  std::cout << "scale_d " << act.scale << ", offset_d " << act.offset << '\n';

  const ptq::tensor_view w = ptq::view_of(weight.data(), {64, 3, 3, 3}, "conv1.weight");
  const ptq::arq_settings arq{8, /*channel_wise=*/true};
  const ptq::weight_quant_result wq =
      ptq::value_or_throw(ptq::arq_calibrate(w, ptq::layer_type::conv2d, 1, arq));
  std::cout << wq.scale.size() << " weight scales, the first " << wq.scale[0] << '\n';
}
// [/readme:numerics]

#include <random>

int main() {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> batches(2, std::vector<float>(4096));
  for (auto& b : batches) {
    for (float& x : b)
      x = normal(gen);
  }
  std::vector<float> weight(64 * 3 * 3 * 3);
  for (float& x : weight)
    x = 0.1f * normal(gen);
  calibrate(batches, weight);
  return 0;
}
