// The fake-quantized weights of a calibrated model under the names of its weights file, so the
// float model loads them unchanged: each quantized layer's weight replaced (divided back by its
// DMQ factors, which the engine does not apply to the weights it runs), a fused conv's weight
// and bias replaced by the fused ones and its BatchNorm tensors left out, every other tensor
// kept. The weights come from any source with `entries` (each with a `name`) and
// `result<T> get(std::string_view name) const` (T with `shape` and `data`), such as
// io::safetensors_file, so this header needs no io header.
// Depends on: core and algorithms.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "ptq/algorithms/activations/dmq.hpp"
#include "ptq/core/error.hpp"
#include "ptq/session/calibration_session.hpp"
#include "ptq/session/model_manifest.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// One tensor of the exported weights (float32, C order).
struct exported_tensor {
  std::string name;
  std::vector<std::size_t> shape;
  std::vector<float> data;
};

/// The tensors of the fake-quantized weights file, in the weights file's order; a fused bias
/// the conv did not have comes last. Non-floating-point tensors (such as BatchNorm's
/// num_batches_tracked) are left out. `model` is the manifest the session's layers were made
/// from (same order). Errors: a layer count that does not match, or a tensor of the weights
/// file that cannot be read.
template <class Weights>
[[nodiscard]] result<std::vector<exported_tensor>> fake_quant_weights(const calibration_session& s,
                                                                      const model_manifest& model,
                                                                      const Weights& weights) {
  if (model.layers.size() != s.layers().size()) {
    return make_error(errc::session_call_invalid, "fake_quant_weights: the manifest has " +
                                                      std::to_string(model.layers.size()) +
                                                      " layers, the session " +
                                                      std::to_string(s.layers().size()));
  }
  std::vector<std::string> drop;
  std::vector<exported_tensor> replaced;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const auto& m = model.layers[i];
    const auto& l = s.layers()[i];
    if (m.weight_name.empty() || !(l.plan.quant_enable || l.fused))
      continue;
    const float* working = l.desc.weight.in_place();  // the session's: float32, C order
    exported_tensor w{
        m.weight_name, l.desc.weight.shape, {working, working + l.desc.weight.size()}};
    if (!l.balance_factors.empty()) {
      std::vector<float> inv(l.balance_factors.size());
      for (std::size_t c = 0; c < inv.size(); ++c)
        inv[c] = 1.0f / l.balance_factors[c];
      if (auto st =
              dmq_apply_to_weight(w.data.data(), w.shape, l.desc.type, l.desc.conv.groups, inv);
          !st) {
        return make_error(st.error().code, m.weight_name + ": " + st.error().message);
      }
    }
    replaced.push_back(std::move(w));
    if (l.fused) {
      const std::string bias_name = m.bias_name.empty() ? m.desc.name + ".bias" : m.bias_name;
      replaced.push_back({bias_name, {l.bias_storage.size()}, l.bias_storage});
      drop.insert(drop.end(), m.batch_norm_names.begin(), m.batch_norm_names.end());
    }
  }
  std::vector<exported_tensor> out;
  for (const auto& e : weights.entries) {
    if (std::find(drop.begin(), drop.end(), e.name) != drop.end())
      continue;
    auto it = std::find_if(replaced.begin(), replaced.end(),
                           [&](const exported_tensor& t) { return t.name == e.name; });
    if (it != replaced.end()) {
      out.push_back(std::move(*it));
      replaced.erase(it);
      continue;
    }
    auto t = weights.get(e.name);
    if (!t) {
      if (t.error().code == errc::unsupported_dtype)
        continue;  // integer tensors (num_batches_tracked) are not weights the float model needs
      return t.error();
    }
    out.push_back({e.name, std::move(t.value().shape), std::move(t.value().data)});
  }
  for (auto& t : replaced)
    out.push_back(std::move(t));
  return out;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
