// The digits example's pipeline: a ptq calibration session driven through its phases on the
// library's reference forward pass of the manifest's sequential model
// (ptq/session/sequential_calibration.hpp: the code there is how an engine feeds each phase;
// `ptq calibrate` runs the bundled model the same way), then the FP32 and the quantized
// accuracy. Used by the example programs (examples/digits, examples/mpi) and by the tests.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ptq/io/read_file.hpp"
#include "ptq/io/safetensors.hpp"
#include "ptq/kernels/kernel_set.hpp"
#include "ptq/session/calibration_session.hpp"
#include "ptq/session/model_manifest.hpp"
#include "ptq/session/sequential_calibration.hpp"

namespace digits {

using batch = ptq::io::float_tensor;

struct pipeline_result {
  std::optional<ptq::calibration_session> session;
  ptq::record_file record;
  double fp32_accuracy = 0.0;
  double quant_accuracy = 0.0;
  /// Per layer (model order): SQNR in dB of each enabled layer's quantize-dequantized input on
  /// the test set; NaN for layers that are not quantized.
  std::vector<double> activation_sqnr_db;
  std::vector<ptq::diagnostic> diagnostics;
  std::string error;  ///< empty on success
};

/// Calibrates `model` with `config` on `calib` images (batches of `batch_size`, `batch_num` of
/// them), then evaluates FP32 and quantized accuracy on `test`. Each quantizable layer's input
/// is computed with the layers before it already fake-quantized (the toolkit's flow); the
/// quantized evaluation also quantize-dequantizes every layer input with the recorded
/// scale_d/offset_d.
inline pipeline_result calibrate_and_evaluate(const ptq::amct_config& config,
                                              const ptq::model_manifest& model, const batch& calib,
                                              const batch& test,
                                              const std::vector<float>& test_labels,
                                              std::size_t batch_size,
                                              ptq::session_options options = {}) {
  pipeline_result out;
  auto fail = [&](const ptq::error& e) {
    out.error = e.message;
    return std::move(out);  // the session is move-only
  };
  auto logits = ptq::forward_sequential(model, ptq::manifest_descs(model), test, 1);
  if (!logits)
    return fail(logits.error());
  out.fp32_accuracy = ptq::top1_accuracy(ptq::top1_classes(logits.value()), test_labels);

  std::vector<ptq::layer_desc> descs;
  for (const auto& m : model.layers)
    descs.push_back(m.desc);
  auto created = ptq::calibration_session::create(config, descs, std::move(options));
  out.diagnostics = created.diagnostics();
  if (!created) {
    out.error = "the config does not resolve for this model";
    return out;
  }
  out.session.emplace(std::move(created).value());
  auto& s = *out.session;
  if (auto st = ptq::calibrate_sequential(s, model, calib, batch_size, 1); !st)
    return fail(st.error());
  auto rec = s.record();
  if (!rec)
    return fail(rec.error());
  out.record = std::move(rec).value();
  static const ptq::kernels::kernel_set reference = ptq::kernels::reference_kernel_set();
  auto q = ptq::forward_quantized(s, model, test, 1, reference);
  if (!q)
    return fail(q.error());
  out.quant_accuracy = ptq::top1_accuracy(ptq::top1_classes(q.value().logits), test_labels);
  out.activation_sqnr_db = std::move(q.value().activation_sqnr_db);
  return out;
}

/// Loads the bundled example's files from `dir` (examples/digits).
struct digits_data {
  ptq::model_manifest model;
  ptq::io::safetensors_file weights;
  batch calib;
  batch test;
  std::vector<float> test_labels;
};

inline bool load_digits(const std::string& dir, digits_data& d, std::string& error) {
  auto weights = ptq::io::read_safetensors(dir + "/model.safetensors");
  if (!weights) {
    error = weights.error().message;
    return false;
  }
  d.weights = std::move(weights).value();
  const auto text = ptq::try_read_file(dir + "/manifest.json", ptq::default_text_file_limit);
  if (!text) {
    error = text.error().message;
    return false;
  }
  auto model = ptq::try_parse_manifest(text.value(), d.weights);
  if (!model) {
    error = model.error().message;
    return false;
  }
  d.model = std::move(model).value();
  auto load = [&](const std::string& file, batch& images, std::vector<float>* labels) {
    auto f = ptq::io::read_safetensors(dir + "/" + file);
    if (!f) {
      error = f.error().message;
      return false;
    }
    auto t = f->get("images");
    if (!t) {
      error = t.error().message;
      return false;
    }
    images = std::move(t).value();
    if (labels) {
      auto l = f->get("labels");
      if (!l) {
        error = l.error().message;
        return false;
      }
      *labels = std::move(l->data);
    }
    return true;
  };
  return load("calib.safetensors", d.calib, nullptr) &&
         load("test.safetensors", d.test, &d.test_labels);
}

}  // namespace digits
