// `ptq calibrate` with no model files: the bundled digits model (bundled_model.hpp) calibrated
// through the session on the library's reference forward pass (ptq::calibrate_sequential), then
// the FP32 and the quantized test accuracy.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bundled_model.hpp"
#include "ptq/session/calibration_session.hpp"
#include "ptq/session/sequential_calibration.hpp"

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

/// Calibrates the bundled model through `s` (created from the model's layers, nothing fed yet)
/// on the calibration images (batch_num batches of `batch_size`), then evaluates FP32 and
/// quantized accuracy on the test images; the quantized evaluation also quantize-dequantizes
/// every layer input with the recorded scale_d / offset_d (`k`'s fake_quant kernel).
inline ptq::result<bundled_result> calibrate_bundled(ptq::calibration_session& s,
                                                     const bundled_model& m, std::size_t batch_size,
                                                     unsigned threads,
                                                     const ptq::kernels::kernel_set& k) {
  bundled_result out;
  auto logits = ptq::forward_sequential(m.model, ptq::manifest_descs(m.model), m.test, threads);
  if (!logits)
    return logits.error();
  out.fp32_predictions = ptq::top1_classes(logits.value());
  out.fp32_accuracy = ptq::top1_accuracy(out.fp32_predictions, m.test_labels);
  if (auto st = ptq::calibrate_sequential(s, m.model, m.calib, batch_size, threads); !st)
    return st.error();
  auto rec = s.record();
  if (!rec)
    return rec.error();
  out.record = std::move(rec).value();
  auto q = ptq::forward_quantized(s, m.model, m.test, threads, k);
  if (!q)
    return q.error();
  out.quant_predictions = ptq::top1_classes(q.value().logits);
  out.quant_accuracy = ptq::top1_accuracy(out.quant_predictions, m.test_labels);
  out.activation_sqnr_db = std::move(q.value().activation_sqnr_db);
  return out;
}

}  // namespace ptq_cli
