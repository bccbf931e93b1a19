// What AdaRound (ada.hpp, docs/ada.md) takes and gives: one layer and its samples, the settings,
// the progress it reports and the result.
// Depends on: core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ptq/algorithms/layer/activation_fn.hpp"
#include "ptq/algorithms/layer/layer_geometry.hpp"
#include "ptq/algorithms/weights/ada_rounding.hpp"
#include "ptq/algorithms/weights/arq.hpp"
#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Progress of one AdaRound optimisation (reported every `ada_settings::report_every` iterations
/// and after the last).
struct ada_progress {
  std::size_t iteration = 0;  ///< iterations done
  std::size_t total = 0;      ///< num_iteration
  double recon_loss = 0.0;    ///< reconstruction loss of the last minibatch
  double round_loss = 0.0;    ///< rounding regulariser of the last iteration (0 in warm start)
};

/// ADA settings (JSON `weight_quant_params` of an ada layer, plus the run's own options).
struct ada_settings {
  unsigned num_iteration = 10000;
  float reg_param = 0.01f;
  float beta_range_start = 20.0f;
  float beta_range_end = 2.0f;
  float warm_start = 0.2f;
  bool channel_wise = true;
  std::uint64_t seed = 0;       ///< minibatch generator seed
  std::size_t batch_size = 32;  ///< the toolkit's fixed minibatch
  detail::adam_params adam{};   ///< the toolkit uses torch's defaults (lr 1e-3)
  unsigned threads = 1;         ///< results do not depend on it
  /// The iterations use `threads` only from this many multiply-adds per minibatch forward: below
  /// it, handing the pool its work (several calls per iteration) costs more than it saves.
  std::size_t parallel_madds = std::size_t{1} << 20;
  std::size_t report_every = 100;
  std::function<void(const ada_progress&)> on_progress;
};

/// One AdaRound layer and its data. `input` holds `samples` per-sample inputs (the layer's input
/// with the earlier layers quantized); `target` the matching act(float layer) outputs, or null
/// to compute them from `input` with the float weight (what `ptq calibrate --ada-data` does).
struct ada_problem {
  std::string name = "layer";
  layer_geometry geometry;
  const float* weight = nullptr;  ///< native PyTorch layout, float (fused, DMQ-balanced)
  const float* bias = nullptr;    ///< [Cout] or null
  activation_desc activation;
  const float* input = nullptr;
  const float* target = nullptr;
  std::size_t samples = 0;
};

struct ada_result {
  weight_quant_result params;  ///< scale_w (KL initial scale), offset_w = 0, 8 bits
  std::vector<float> weight;   ///< the fake-quantized weight with the learned hard rounding
  std::size_t rounded_up = 0;  ///< weights rounded up (h ≥ 0.5)
  std::size_t changed = 0;     ///< weights whose rounding differs from round-to-nearest
};

/// The weight's shape in PyTorch layout (Linear [Cout, Cin], Conv2d [Cout, Cin/g, kh, kw],
/// ConvTranspose2d [Cin, Cout/g, kh, kw]).
[[nodiscard]] inline std::vector<std::size_t> weight_shape(const layer_geometry& g) {
  if (g.type == layer_type::linear)
    return {g.out_channels, g.in_channels};
  if (g.type == layer_type::conv_transpose2d)
    return {g.in_channels, g.out_channels / g.groups, g.kernel_h, g.kernel_w};
  return {g.out_channels, g.in_channels / g.groups, g.kernel_h, g.kernel_w};
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
