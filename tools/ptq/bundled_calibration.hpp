// `ptq calibrate` with no model files: the bundled digits model (bundled_model.hpp) drives the
// calibration session through its phases as an inference engine would (DMQ, weights, AdaRound,
// activations), then measures the FP32 and the quantized test accuracy.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "bundled_model.hpp"
#include "ptq/session/calibrate_files.hpp"
#include "ptq/session/calibration_session.hpp"

namespace ptq_cli {

/// What the bundled run produces.
struct bundled_result {
  ptq::record_file record;
  double fp32_accuracy = 0.0;
  double quant_accuracy = 0.0;
  /// Each test image's class, FP32 and fake-quantized (an engine's int8 model is checked
  /// against these, image for image).
  std::vector<int> fp32_predictions;
  std::vector<int> quant_predictions;
  /// Per layer (model order): the SQNR in dB of each quantized layer's quantize-dequantized
  /// input on the test set; NaN for layers that are not quantized.
  std::vector<double> activation_sqnr_db;
};

namespace detail {

/// The session's layers as the forward pass runs them (fused, balanced, fake-quantized as far
/// as the session has got).
[[nodiscard]] inline std::vector<const ptq::layer_desc*> session_descs(
    const ptq::calibration_session& s) {
  std::vector<const ptq::layer_desc*> v;
  for (const auto& l : s.layers())
    v.push_back(&l.desc);
  return v;
}

/// Layer i's input divided by its DMQ factors, if it has any (what the next layers see).
[[nodiscard]] inline ptq::result<> divide_by_factors(const ptq::calibration_session& s,
                                                     std::size_t i, ptq::io::float_tensor& x) {
  return ptq::divide_by_balance_factors(s.layers()[i], x.data.data(), x.shape);
}

/// Phase 2: the DMQ factors from one calibration forward (fused float weights).
[[nodiscard]] inline ptq::result<> bundled_dmq(ptq::calibration_session& s, const bundled_model& m,
                                               std::size_t batch_size, unsigned threads) {
  const auto dmq = s.dmq_layers();
  if (dmq.empty())
    return {};
  auto r = ptq::forward_sequential(m.model, session_descs(s),
                                   ptq::batch_rows(m.calib, 0, batch_size), threads,
                                   [&](std::size_t i, ptq::io::float_tensor& x) -> ptq::result<> {
                                     const auto& name = s.layers()[i].desc.name;
                                     if (std::find(dmq.begin(), dmq.end(), name) == dmq.end())
                                       return {};
                                     return s.feed_dmq(name, ptq::batch_ref(x, name + " input"));
                                   });
  if (!r)
    return r.error();
  return {};
}

/// Phase 3 for the AdaRound layers, after ARQ: each from the calibration images, its input
/// computed with the earlier layers quantized and its target with every AdaRound layer in
/// float (docs/ada.md).
[[nodiscard]] inline ptq::result<> bundled_ada(ptq::calibration_session& s, const bundled_model& m,
                                               unsigned threads) {
  const auto ada = s.ada_layers();
  if (ada.empty())
    return {};
  std::vector<ptq::layer_desc> float_descs;
  for (const auto* d : session_descs(s))
    float_descs.push_back(*d);  // the AdaRound layers' float (balanced) weights
  for (const auto& name : ada) {
    std::size_t idx = 0;
    while (s.layers()[idx].desc.name != name)
      ++idx;
    const auto input_of =
        [&](const std::vector<const ptq::layer_desc*>& mode) -> ptq::result<ptq::io::float_tensor> {
      ptq::io::float_tensor captured;
      auto r =
          ptq::forward_sequential(m.model, mode, m.calib, threads,
                                  [&](std::size_t i, ptq::io::float_tensor& x) -> ptq::result<> {
                                    if (i == idx)
                                      captured = x;
                                    return divide_by_factors(s, i, x);
                                  });
      if (!r)
        return r.error();
      return captured;
    };
    auto in_float = session_descs(s);
    for (std::size_t i = 0; i < in_float.size(); ++i) {
      if (std::find(ada.begin(), ada.end(), s.layers()[i].desc.name) != ada.end())
        in_float[i] = &float_descs[i];
    }
    auto xq = input_of(session_descs(s));
    if (!xq)
      return xq.error();
    auto xf = input_of(in_float);
    if (!xf)
      return xf.error();
    const auto fref = ptq::batch_ref(xf.value(), name + " float input");
    if (auto st = s.quantize_ada(name, ptq::batch_ref(xq.value(), name + " input"), &fref); !st)
      return st;
  }
  return {};
}

/// Phase 4: each batch through the network with fake-quantized weights, float activations
/// (twice in the bounded memory mode: the session's second pass).
[[nodiscard]] inline ptq::result<> bundled_activations(ptq::calibration_session& s,
                                                       const bundled_model& m,
                                                       std::size_t batch_size, unsigned threads) {
  const std::size_t batches = s.plan().batch_num;
  for (std::size_t pb = 0; pb < s.activation_passes() * batches; ++pb) {
    const std::size_t b = pb % batches;
    auto r = ptq::forward_sequential(
        m.model, session_descs(s), ptq::batch_rows(m.calib, b * batch_size, (b + 1) * batch_size),
        threads, [&](std::size_t i, ptq::io::float_tensor& x) -> ptq::result<> {
          const auto& l = s.layers()[i];
          if (l.plan.quant_enable) {
            if (auto st = s.feed(l.desc.name, ptq::batch_ref(x, l.desc.name + " input")); !st)
              return st;
          }
          return divide_by_factors(s, i, x);
        });
    if (!r)
      return r.error();
  }
  return {};
}

/// The quantized network on the test images: inputs divided by the factors, then
/// quantize-dequantized with the recorded scale_d / offset_d; each layer's input SQNR kept.
[[nodiscard]] inline ptq::result<> bundled_evaluate(const ptq::calibration_session& s,
                                                    const bundled_model& m, unsigned threads,
                                                    const ptq::kernels::kernel_set& k,
                                                    bundled_result& out) {
  out.activation_sqnr_db.assign(m.model.layers.size(), std::nan(""));
  auto qlogits =
      ptq::forward_sequential(m.model, session_descs(s), m.test, threads,
                              [&](std::size_t i, ptq::io::float_tensor& x) -> ptq::result<> {
                                if (auto st = divide_by_factors(s, i, x); !st)
                                  return st;
                                out.activation_sqnr_db[i] = ptq::fake_quantize_input(
                                    s.layers()[i], x.data.data(), x.data.size(), k);
                                return {};
                              });
  if (!qlogits)
    return qlogits.error();
  out.quant_predictions = ptq::top1_classes(qlogits.value());
  out.quant_accuracy = ptq::top1_accuracy(out.quant_predictions, m.test_labels);
  return {};
}

}  // namespace detail

/// Calibrates the bundled model through `s` (created from the model's layers, nothing fed yet)
/// on the calibration images (batch_num batches of `batch_size`), each layer's input computed
/// with the layers before it already fake-quantized (the toolkit's flow), then evaluates FP32
/// and quantized accuracy on the test images; the quantized evaluation also
/// quantize-dequantizes every layer input with the recorded scale_d / offset_d (`k`'s
/// fake_quant kernel).
inline ptq::result<bundled_result> calibrate_bundled(ptq::calibration_session& s,
                                                     const bundled_model& m, std::size_t batch_size,
                                                     unsigned threads,
                                                     const ptq::kernels::kernel_set& k) {
  bundled_result out;
  std::vector<const ptq::layer_desc*> fp32;
  for (const auto& l : m.model.layers)
    fp32.push_back(&l.desc);
  auto logits = ptq::forward_sequential(m.model, fp32, m.test, threads);
  if (!logits)
    return logits.error();
  out.fp32_predictions = ptq::top1_classes(logits.value());
  out.fp32_accuracy = ptq::top1_accuracy(out.fp32_predictions, m.test_labels);
  const std::size_t batches = s.plan().batch_num;
  if (m.calib.shape[0] < batches * batch_size) {
    return ptq::make_error(ptq::errc::session_input_invalid,
                           "batch_num " + std::to_string(batches) + " x " +
                               std::to_string(batch_size) +
                               " needs more calibration images than the " +
                               std::to_string(m.calib.shape[0]) + " bundled ones");
  }
  if (auto st = detail::bundled_dmq(s, m, batch_size, threads); !st)
    return st.error();
  if (auto st = s.quantize_weights(); !st)  // phase 3: ARQ, then AdaRound
    return st.error();
  if (auto st = detail::bundled_ada(s, m, threads); !st)
    return st.error();
  if (auto st = detail::bundled_activations(s, m, batch_size, threads); !st)
    return st.error();
  auto rec = s.record();
  if (!rec)
    return rec.error();
  out.record = std::move(rec).value();
  if (auto st = detail::bundled_evaluate(s, m, threads, k, out); !st)
    return st.error();
  return out;
}

}  // namespace ptq_cli
