// A calibration session driven through its phases on the reference forward pass of a
// sequential model manifest (sequential_forward.hpp), as an inference engine drives it: the DMQ
// factors from one batch through the float model, the weights (ARQ, then each AdaRound layer
// from its input with the earlier layers quantized and its target with every AdaRound layer in
// float, docs/ada.md), then each batch through the network with fake-quantized weights and
// float activations (twice when the activation mode asks for two passes). `ptq calibrate` runs
// the bundled digits model so; the examples and the tests too. An engine with its own forward
// pass does the same with its own; this header is the reference for what each phase feeds.
// Depends on: core, kernels and io.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "ptq/core/error.hpp"
#include "ptq/io/safetensors.hpp"
#include "ptq/kernels/kernel_set.hpp"
#include "ptq/session/calibrate_files.hpp"
#include "ptq/session/calibration_session.hpp"
#include "ptq/session/sequential_forward.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// The manifest's own layer descriptions (the float model), one per layer.
[[nodiscard]] inline std::vector<const layer_desc*> manifest_descs(const model_manifest& m) {
  std::vector<const layer_desc*> v;
  for (const auto& l : m.layers)
    v.push_back(&l.desc);
  return v;
}

/// The session's layers as the forward pass runs them: fused, balanced and fake-quantized as
/// far as the session has got.
[[nodiscard]] inline std::vector<const layer_desc*> session_descs(const calibration_session& s) {
  std::vector<const layer_desc*> v;
  for (const auto& l : s.layers())
    v.push_back(&l.desc);
  return v;
}

namespace detail {

/// Layer i's input divided by its DMQ factors, if it has any (what the layer computes on).
[[nodiscard]] inline result<> divide_input(const calibration_session& s, std::size_t i,
                                           io::float_tensor& x) {
  return divide_by_balance_factors(s.layers()[i], x.data.data(), x.shape);
}

/// Layer `idx`'s input on `images` with the layers run as `descs` say.
[[nodiscard]] inline result<io::float_tensor> input_of_layer(
    const calibration_session& s, const model_manifest& m,
    const std::vector<const layer_desc*>& descs, const io::float_tensor& images, std::size_t idx,
    unsigned threads) {
  io::float_tensor captured;
  auto r = forward_sequential(m, descs, images, threads,
                              [&](std::size_t i, io::float_tensor& x) -> result<> {
                                if (i == idx)
                                  captured = x;
                                return divide_input(s, i, x);
                              });
  if (!r)
    return r.error();
  return captured;
}

}  // namespace detail

/// Phase 2: the DMQ factors from one calibration batch (fused float weights); nothing without
/// DMQ layers.
[[nodiscard]] inline result<> sequential_dmq(calibration_session& s, const model_manifest& m,
                                             const io::float_tensor& batch, unsigned threads) {
  const auto dmq = s.dmq_layers();
  if (dmq.empty())
    return {};
  auto r = forward_sequential(m, session_descs(s), batch, threads,
                              [&](std::size_t i, io::float_tensor& x) -> result<> {
                                const auto& name = s.layers()[i].desc.name;
                                if (std::find(dmq.begin(), dmq.end(), name) == dmq.end())
                                  return {};
                                return s.feed_dmq(name, batch_view(x, name + " input"));
                              });
  if (!r)
    return r.error();
  return {};
}

/// Phase 3 for the AdaRound layers, after ARQ: each from every calibration image, its input
/// computed with the earlier layers quantized and its target with every AdaRound layer in float.
[[nodiscard]] inline result<> sequential_ada(calibration_session& s, const model_manifest& m,
                                             const io::float_tensor& calib, unsigned threads) {
  const auto ada = s.ada_layers();
  if (ada.empty())
    return {};  // no copy of the weights for a run without AdaRound
  // The AdaRound layers' float (balanced) weights, copied: quantize_ada replaces them in the
  // session's working memory, which the session's views point at.
  std::vector<layer_desc> float_descs;
  std::vector<std::vector<float>> float_weights;
  for (const auto* d : session_descs(s)) {
    float_descs.push_back(*d);
    if (d->type == layer_type::avg_pool2d)
      continue;
    const float* w = d->weight.in_place();
    float_weights.emplace_back(w, w + d->weight.size());
    float_descs.back().weight.data = float_weights.back().data();
  }
  for (const auto& name : ada) {
    std::size_t idx = 0;
    while (s.layers()[idx].desc.name != name)
      ++idx;
    auto in_float = session_descs(s);
    for (std::size_t i = 0; i < in_float.size(); ++i) {
      if (std::find(ada.begin(), ada.end(), s.layers()[i].desc.name) != ada.end())
        in_float[i] = &float_descs[i];
    }
    auto xq = detail::input_of_layer(s, m, session_descs(s), calib, idx, threads);
    if (!xq)
      return xq.error();
    auto xf = detail::input_of_layer(s, m, in_float, calib, idx, threads);
    if (!xf)
      return xf.error();
    const auto fref = batch_view(xf.value(), name + " float input");
    if (auto st = s.quantize_ada(name, batch_view(xq.value(), name + " input"), &fref); !st)
      return st;
  }
  return {};
}

/// Phase 4: each batch through the network with fake-quantized weights and float activations,
/// as many passes as the session's activation mode asks for.
[[nodiscard]] inline result<> sequential_activations(calibration_session& s,
                                                     const model_manifest& m,
                                                     const io::float_tensor& calib,
                                                     std::size_t batch_size, unsigned threads) {
  const std::size_t batches = s.plan().batch_num;
  for (std::size_t pb = 0; pb < s.activation_passes() * batches; ++pb) {
    const std::size_t b = pb % batches;
    auto r = forward_sequential(
        m, session_descs(s), batch_rows(calib, b * batch_size, (b + 1) * batch_size), threads,
        [&](std::size_t i, io::float_tensor& x) -> result<> {
          const auto& l = s.layers()[i];
          if (l.plan.quant_enable) {
            auto st = s.feed(l.desc.name, batch_view(x, l.desc.name + " input"));
            if (!st)
              return st;
          }
          return detail::divide_input(s, i, x);
        });
    if (!r)
      return r.error();
  }
  return {};
}

/// Runs the phases of `s` (created from the manifest's layers, nothing fed yet) on the rows of
/// `calib`, batch_num batches of `batch_size` (the DMQ factors from the first; AdaRound from
/// every row of `calib`), each layer's input computed with the layers before it already
/// fake-quantized (the toolkit's flow); s.record() then holds the result. Errors: fewer rows than
/// batch_num x batch_size (E803), and every error of the session and of the forward pass.
[[nodiscard]] inline result<> calibrate_sequential(calibration_session& s, const model_manifest& m,
                                                   const io::float_tensor& calib,
                                                   std::size_t batch_size, unsigned threads) {
  const std::size_t batches = s.plan().batch_num;
  const std::size_t rows = calib.shape.empty() ? 0 : calib.shape[0];
  if (rows < batches * batch_size) {
    return make_error(errc::session_input_invalid, "batch_num " + std::to_string(batches) + " x " +
                                                       std::to_string(batch_size) +
                                                       " needs more calibration images than the " +
                                                       std::to_string(rows) + " given");
  }
  if (auto st = sequential_dmq(s, m, batch_rows(calib, 0, batch_size), threads); !st)
    return st;
  if (auto st = s.quantize_weights(); !st)  // ARQ, and the AdaRound layers' float weights
    return st;
  if (auto st = sequential_ada(s, m, calib, threads); !st)
    return st;
  return sequential_activations(s, m, calib, batch_size, threads);
}

/// The quantized network on some images, and each layer's input SQNR (NaN for a layer that is
/// not quantized).
struct quantized_forward {
  io::float_tensor logits;
  std::vector<double> activation_sqnr_db;
};

/// Runs the calibrated network of `s` on `images`: each layer's input divided by its DMQ
/// factors and quantize-dequantized with the recorded scale_d / offset_d (`k`'s fake_quant
/// kernel), its weight fake-quantized.
[[nodiscard]] inline result<quantized_forward> forward_quantized(const calibration_session& s,
                                                                 const model_manifest& m,
                                                                 const io::float_tensor& images,
                                                                 unsigned threads,
                                                                 const kernels::kernel_set& k) {
  quantized_forward out;
  out.activation_sqnr_db.assign(m.layers.size(), std::nan(""));
  auto logits = forward_sequential(
      m, session_descs(s), images, threads, [&](std::size_t i, io::float_tensor& x) -> result<> {
        if (auto st = detail::divide_input(s, i, x); !st)
          return st;
        out.activation_sqnr_db[i] =
            fake_quantize_input(s.layers()[i], x.data.data(), x.data.size(), k);
        return {};
      });
  if (!logits)
    return logits.error();
  out.logits = std::move(logits).value();
  return out;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
