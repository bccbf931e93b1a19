// The digits example's pipeline: an engine that runs a manifest's sequential model and drives a
// ptq calibration session the way an inference engine embeds ptq, then measures the FP32 and
// the quantized accuracy. Used by the example programs (examples/digits, examples/mpi) and by
// the tests; `ptq calibrate` with no arguments runs the same flow in its own engine,
// tools/ptq/bundled_model.hpp, and includes nothing from examples/.
#pragma once

#include <xtensor/xarray.hpp>
#include <xtensor/xview.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "digits_engine.hpp"
#include "ptq/io/read_file.hpp"
#include "ptq/io/safetensors.hpp"
#include "ptq/session/calibration_session.hpp"
#include "ptq/session/model_manifest.hpp"

namespace digits {

inline activation to_engine(const ptq::activation_desc& a) {
  activation out;
  switch (a.kind) {
    case ptq::activation_kind::none:
      break;
    case ptq::activation_kind::relu:
      out.kind = "ReLU";
      break;
    case ptq::activation_kind::relu6:
      out.kind = "ReLU6";
      break;
    case ptq::activation_kind::sigmoid:
      out.kind = "Sigmoid";
      break;
    case ptq::activation_kind::tanh:
      out.kind = "Tanh";
      break;
    case ptq::activation_kind::leaky_relu:
      out.kind = "LeakyReLU";
      out.negative_slope = a.negative_slope;
      break;
    case ptq::activation_kind::prelu:
      out.kind = "PReLU";
      out.prelu = a.prelu_weight;
      break;
    case ptq::activation_kind::gelu:
      out.kind = "GELU";
      out.gelu_tanh = a.gelu_tanh;
      break;
    case ptq::activation_kind::rrelu:
      out.kind = "RReLU";
      out.negative_slope = (a.rrelu_lower + a.rrelu_upper) / 2.0f;
      break;
  }
  return out;
}

inline std::array<std::size_t, 2> pair_of(const std::vector<std::size_t>& v, std::size_t fallback) {
  if (v.empty())
    return {fallback, fallback};
  if (v.size() == 1)
    return {v[0], v[0]};
  return {v[0], v[1]};
}

/// One layer of the sequential model with the given description (weights, BN, activation);
/// `x` is already flattened where the manifest says so.
inline tensor run_layer(const ptq::manifest_layer& m, const ptq::layer_desc& d, tensor x) {
  std::vector<float> bias;
  if (d.bias)
    bias.assign(d.bias->begin(), d.bias->end());
  tensor y;
  switch (d.type) {
    case ptq::layer_type::conv2d:
      y = conv2d(x, d.weight, bias, pair_of(d.conv.stride, 1), pair_of(d.conv.padding, 0),
                 pair_of(d.conv.dilation, 1), d.conv.groups);
      break;
    case ptq::layer_type::linear:
      y = linear(x, d.weight, bias);
      break;
    case ptq::layer_type::avg_pool2d:
      y = avg_pool2d(x, pair_of(m.kernel_size, 2), pair_of(m.pool_stride, 2));
      break;
    default:
      throw std::invalid_argument(d.name +
                                  ": the digits engine runs Conv2d, Linear and AvgPool2d only");
  }
  if (d.batch_norm) {
    const auto& bn = *d.batch_norm;
    batch_norm(y, bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.eps);
  }
  apply_activation(to_engine(d.activation), y);
  return y;
}

/// Runs the model; `hook(i, x)` sees (and may change) layer i's input first.
inline tensor forward(const ptq::model_manifest& model,
                      const std::vector<const ptq::layer_desc*>& descs, tensor x,
                      const std::function<void(std::size_t, tensor&)>& hook = {}) {
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    if (model.layers[i].flatten)
      x.reshape({x.shape()[0], x.size() / x.shape()[0]});
    if (hook)
      hook(i, x);
    x = run_layer(model.layers[i], *descs[i], std::move(x));
  }
  return x;
}

inline double accuracy(const tensor& logits, const std::vector<float>& labels) {
  std::size_t right = 0;
  const std::size_t n = logits.shape()[0], k = logits.shape()[1];
  for (std::size_t b = 0; b < n; ++b) {
    std::size_t best = 0;
    for (std::size_t c = 1; c < k; ++c) {
      if (logits(b, c) > logits(b, best))
        best = c;
    }
    right += static_cast<float>(best) == labels[b];
  }
  return static_cast<double>(right) / static_cast<double>(n);
}

inline tensor rows(const tensor& x, std::size_t begin, std::size_t end) {
  tensor out = xt::view(x, xt::range(begin, end));
  return out;
}

/// Divides a layer input by its DMQ factors (channel axis 1, or last for Linear).
inline void divide_by_factors(tensor& x, const std::vector<float>& f, ptq::layer_type t) {
  if (f.empty())
    return;
  std::vector<std::size_t> shape(x.shape().begin(), x.shape().end());
  if (t == ptq::layer_type::linear && x.dimension() > 2) {
    x.reshape({shape[0], x.size() / shape[0]});
    shape = {x.shape()[0], x.shape()[1]};
  }
  (void)ptq::dmq_apply_to_activation(x.data(), shape, t, f);
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

/// Calibrates `model` with `config` on `calib` images (batches of `batch_size`, `batch_num` of
/// them), then evaluates FP32 and quantized accuracy on `test`. Each quantizable layer's input
/// is computed by the engine with the layers before it already fake-quantized (the toolkit's
/// flow); the quantized evaluation also quantize-dequantizes every layer input with the
/// recorded scale_d/offset_d.
inline pipeline_result calibrate_and_evaluate(const ptq::amct_config& config,
                                              const ptq::model_manifest& model, const tensor& calib,
                                              const tensor& test,
                                              const std::vector<float>& test_labels,
                                              std::size_t batch_size,
                                              ptq::session_options options = {}) {
  pipeline_result out;
  std::vector<ptq::layer_desc> descs;
  for (const auto& m : model.layers)
    descs.push_back(m.desc);
  std::vector<const ptq::layer_desc*> fp32;
  for (const auto& m : model.layers)
    fp32.push_back(&m.desc);
  out.fp32_accuracy = accuracy(forward(model, fp32, test), test_labels);

  auto created = ptq::calibration_session::create(config, descs, std::move(options));
  out.diagnostics = created.diagnostics();
  if (!created) {
    out.error = "the config does not resolve for this model";
    return out;
  }
  out.session.emplace(std::move(created).value());
  auto& s = *out.session;
  auto current = [&] {
    std::vector<const ptq::layer_desc*> v;
    for (const auto& l : s.layers())
      v.push_back(&l.desc);
    return v;
  };
  const std::size_t batches = s.plan().batch_num;
  if (calib.shape()[0] < batches * batch_size) {
    out.error = "batch_num " + std::to_string(batches) + " x " + std::to_string(batch_size) +
                " needs more calibration images than the " + std::to_string(calib.shape()[0]) +
                " given";
    return out;
  }
  auto fail = [&](const ptq::result<>& st) {
    out.error = st.error().message;
    return out;
  };
  // Phase 2: the DMQ factors from one calibration forward (fused float weights).
  const auto dmq = s.dmq_layers();
  if (!dmq.empty()) {
    ptq::result<> st;
    forward(model, current(), rows(calib, 0, batch_size), [&](std::size_t i, tensor& x) {
      const auto& name = model.layers[i].desc.name;
      if (st && std::find(dmq.begin(), dmq.end(), name) != dmq.end()) {
        st = s.feed_dmq(name, ptq::as_tensor_ref(x, name + " input"));
      }
    });
    if (!st)
      return fail(st);
  }
  // Phase 3: ARQ, then each AdaRound layer from the calibration images, its input computed with
  // the earlier layers quantized and its target with every AdaRound layer in float (docs/ada.md).
  if (auto st = s.quantize_weights(); !st)
    return fail(st);
  if (const auto ada = s.ada_layers(); !ada.empty()) {
    const auto float_mode = current();
    std::vector<ptq::layer_desc> float_descs;
    for (const auto* d : float_mode)
      float_descs.push_back(*d);  // the AdaRound layers' float (balanced) weights
    for (const auto& name : ada) {
      std::size_t idx = 0;
      while (s.layers()[idx].desc.name != name)
        ++idx;
      auto input_of = [&](const std::vector<const ptq::layer_desc*>& mode) {
        tensor captured;
        forward(model, mode, calib, [&](std::size_t i, tensor& x) {
          if (i == idx)
            captured = x;
          divide_by_factors(x, s.layers()[i].balance_factors, s.layers()[i].desc.type);
        });
        return captured;
      };
      auto in_float = current();
      for (std::size_t i = 0; i < in_float.size(); ++i) {
        if (std::find(ada.begin(), ada.end(), s.layers()[i].desc.name) != ada.end())
          in_float[i] = &float_descs[i];
      }
      const tensor xq = input_of(current());
      const tensor xf = input_of(in_float);
      const auto fref = ptq::as_tensor_ref(xf, name + " float input");
      if (auto st = s.quantize_ada(name, ptq::as_tensor_ref(xq, name + " input"), &fref); !st)
        return fail(st);
    }
  }
  // Phase 4: each batch through the network with fake-quantized weights, float activations;
  // the session's bounded memory mode asks for the same batches twice (activation_passes).
  for (std::size_t pb = 0; pb < s.activation_passes() * batches; ++pb) {
    const std::size_t b = pb % batches;
    ptq::result<> st;
    forward(model, current(), rows(calib, b * batch_size, (b + 1) * batch_size),
            [&](std::size_t i, tensor& x) {
              const auto& l = s.layers()[i];
              if (st && l.plan.quant_enable) {
                st = s.feed(l.desc.name, ptq::as_tensor_ref(x, l.desc.name + " input"));
              }
              divide_by_factors(x, l.balance_factors, l.desc.type);
            });
    if (!st)
      return fail(st);
  }
  auto rec = s.record();
  if (!rec) {
    out.error = rec.error().message;
    return out;
  }
  out.record = std::move(rec).value();
  // The quantized network: inputs divided by the factors, then quantize-dequantized.
  out.activation_sqnr_db.assign(model.layers.size(), std::nan(""));
  const tensor logits = forward(model, current(), test, [&](std::size_t i, tensor& x) {
    const auto& l = s.layers()[i];
    divide_by_factors(x, l.balance_factors, l.desc.type);
    if (l.activation_params) {
      const tensor before = x;
      fake_quantize(x, l.activation_params->scale, l.activation_params->offset,
                    l.activation_params->bits);
      out.activation_sqnr_db[i] = ptq::sqnr_db(before.data(), x.data(), x.size());
    }
  });
  out.quant_accuracy = accuracy(logits, test_labels);
  return out;
}

/// Loads the bundled example's files from `dir` (examples/digits).
struct digits_data {
  ptq::model_manifest model;
  ptq::io::safetensors_file weights;
  tensor calib;
  tensor test;
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
  auto load = [&](const std::string& file, tensor& images, std::vector<float>* labels) {
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
    images = tensor::from_shape(t->shape);
    std::copy(t->data.begin(), t->data.end(), images.begin());
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
