// The digits example's pipeline: drives a ptq calibration session the way an inference engine
// embeds ptq, on the library's reference forward pass of the manifest's sequential model
// (ptq/session/sequential_forward.hpp, the engine `ptq calibrate` runs the bundled model with),
// then measures the FP32 and the quantized accuracy. Used by the example programs
// (examples/digits, examples/mpi) and by the tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ptq/io/read_file.hpp"
#include "ptq/io/safetensors.hpp"
#include "ptq/kernels/kernel_set.hpp"
#include "ptq/session/calibrate_files.hpp"
#include "ptq/session/calibration_session.hpp"
#include "ptq/session/model_manifest.hpp"
#include "ptq/session/sequential_forward.hpp"

namespace digits {

using batch = ptq::io::float_tensor;

/// The session's layers as the forward pass runs them (fused, balanced, fake-quantized as far
/// as the session has got).
inline std::vector<const ptq::layer_desc*> session_descs(const ptq::calibration_session& s) {
  std::vector<const ptq::layer_desc*> v;
  for (const auto& l : s.layers())
    v.push_back(&l.desc);
  return v;
}

/// The model with layer i described by descs[i], one thread; `hook(i, x)` sees (and may change)
/// layer i's input first.
inline ptq::result<batch> forward(const ptq::model_manifest& model,
                                  const std::vector<const ptq::layer_desc*>& descs, batch x,
                                  const ptq::sequential_hook& hook = {}) {
  return ptq::forward_sequential(model, descs, std::move(x), 1, hook);
}

/// Layer i's input divided by its DMQ factors, if it has any (what the layer computes on).
inline ptq::result<> divide_by_factors(const ptq::calibration_session& s, std::size_t i, batch& x) {
  return ptq::divide_by_balance_factors(s.layers()[i], x.data.data(), x.shape);
}

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

/// Phase 2: the DMQ factors from one calibration forward (fused float weights).
inline ptq::result<> feed_dmq(ptq::calibration_session& s, const ptq::model_manifest& model,
                              const batch& images) {
  const auto dmq = s.dmq_layers();
  if (dmq.empty())
    return {};
  auto r = forward(model, session_descs(s), images, [&](std::size_t i, batch& x) {
    const auto& name = s.layers()[i].desc.name;
    if (std::find(dmq.begin(), dmq.end(), name) == dmq.end())
      return ptq::result<>{};
    return s.feed_dmq(name, ptq::batch_ref(x, name + " input"));
  });
  if (!r)
    return r.error();
  return {};
}

/// Phase 3 for the AdaRound layers, after ARQ: each from the calibration images, its input
/// computed with the earlier layers quantized and its target with every AdaRound layer in
/// float (docs/ada.md).
inline ptq::result<> quantize_ada(ptq::calibration_session& s, const ptq::model_manifest& model,
                                  const batch& calib) {
  const auto ada = s.ada_layers();
  std::vector<ptq::layer_desc> float_descs;
  for (const auto* d : session_descs(s))
    float_descs.push_back(*d);  // the AdaRound layers' float (balanced) weights
  for (const auto& name : ada) {
    std::size_t idx = 0;
    while (s.layers()[idx].desc.name != name)
      ++idx;
    auto input_of = [&](const std::vector<const ptq::layer_desc*>& mode) -> ptq::result<batch> {
      batch captured;
      auto r = forward(model, mode, calib, [&](std::size_t i, batch& x) {
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
    auto xf = xq ? input_of(in_float) : ptq::result<batch>(xq.error());
    if (!xf)
      return xf.error();
    const auto fref = ptq::batch_ref(xf.value(), name + " float input");
    if (auto st = s.quantize_ada(name, ptq::batch_ref(xq.value(), name + " input"), &fref); !st)
      return st;
  }
  return {};
}

/// Phase 4: each batch through the network with fake-quantized weights, float activations;
/// the session's bounded memory mode asks for the same batches twice (activation_passes).
inline ptq::result<> feed_activations(ptq::calibration_session& s, const ptq::model_manifest& model,
                                      const batch& calib, std::size_t batch_size) {
  const std::size_t batches = s.plan().batch_num;
  for (std::size_t pb = 0; pb < s.activation_passes() * batches; ++pb) {
    const std::size_t b = pb % batches;
    auto r = forward(
        model, session_descs(s), ptq::batch_rows(calib, b * batch_size, (b + 1) * batch_size),
        [&](std::size_t i, batch& x) {
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
    return out;
  };
  std::vector<ptq::layer_desc> descs;
  std::vector<const ptq::layer_desc*> fp32;
  for (const auto& m : model.layers) {
    descs.push_back(m.desc);
    fp32.push_back(&m.desc);
  }
  auto logits = forward(model, fp32, test);
  if (!logits)
    return fail(logits.error());
  out.fp32_accuracy = ptq::top1_accuracy(ptq::top1_classes(logits.value()), test_labels);

  auto created = ptq::calibration_session::create(config, descs, std::move(options));
  out.diagnostics = created.diagnostics();
  if (!created) {
    out.error = "the config does not resolve for this model";
    return out;
  }
  out.session.emplace(std::move(created).value());
  auto& s = *out.session;
  const std::size_t batches = s.plan().batch_num;
  if (calib.shape[0] < batches * batch_size) {
    out.error = "batch_num " + std::to_string(batches) + " x " + std::to_string(batch_size) +
                " needs more calibration images than the " + std::to_string(calib.shape[0]) +
                " given";
    return out;
  }
  if (auto st = feed_dmq(s, model, ptq::batch_rows(calib, 0, batch_size)); !st)
    return fail(st.error());
  if (auto st = s.quantize_weights(); !st)  // phase 3: ARQ, then AdaRound
    return fail(st.error());
  if (auto st = quantize_ada(s, model, calib); !st)
    return fail(st.error());
  if (auto st = feed_activations(s, model, calib, batch_size); !st)
    return fail(st.error());
  auto rec = s.record();
  if (!rec)
    return fail(rec.error());
  out.record = std::move(rec).value();
  // The quantized network: inputs divided by the factors, then quantize-dequantized.
  out.activation_sqnr_db.assign(model.layers.size(), std::nan(""));
  static const ptq::kernels::kernel_set reference = ptq::kernels::reference_kernel_set();
  auto qlogits = forward(model, session_descs(s), test, [&](std::size_t i, batch& x) {
    if (auto st = divide_by_factors(s, i, x); !st)
      return st;
    out.activation_sqnr_db[i] =
        ptq::fake_quantize_input(s.layers()[i], x.data.data(), x.data.size(), reference);
    return ptq::result<>{};
  });
  if (!qlogits)
    return fail(qlogits.error());
  out.quant_accuracy = ptq::top1_accuracy(ptq::top1_classes(qlogits.value()), test_labels);
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
  const auto text = ptq::read_file(dir + "/manifest.json", ptq::default_text_file_limit);
  if (!text) {
    error = text.error().message;
    return false;
  }
  auto model = ptq::parse_manifest(text.value(), d.weights);
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
