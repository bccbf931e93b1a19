// The file-driven calibration of `ptq calibrate --model` (docs/calibrate.md): every phase of a
// session fed from tensor files that hold each quantizable layer's input under the layer's
// name, written by the engine that ran the network. No network runs here: the DMQ factors come
// from the first batch, AdaRound learns each layer against its own float output on its samples,
// and every batch is observed as it was saved. The files come from any tensor source with
// `result<T> get(std::string_view name) const` (T with `shape` and `data`), such as
// io::safetensors_file, so this header needs no io header. Every error names the file it comes
// from (error::path). Depends on the session.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ptq/core/error.hpp"
#include "ptq/kernels/kernel_set.hpp"
#include "ptq/session/session.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// A tensor source and the path it is reported under.
template <class Source>
struct named_source {
  std::string path;
  const Source* source = nullptr;
};

/// What a file-driven calibration produces.
struct file_calibration {
  record_file record;
  /// Per layer (session order): the SQNR in dB of the quantize-dequantized input of the last
  /// batch; NaN for layers that are not quantized.
  std::vector<double> activation_sqnr_db;
};

/// Quantize-dequantizes `n` values of layer `l`'s input in place with the layer's recorded
/// scale_d / offset_d (the input already divided by its DMQ factors) and returns the SQNR of the
/// result against the input in dB; NaN (and `x` untouched) when the layer has no activation
/// parameters yet.
[[nodiscard]] inline double fake_quantize_input(const session_layer& l, float* x, std::size_t n,
                                                const kernels::kernel_set& k) {
  if (!l.activation_params)
    return std::numeric_limits<double>::quiet_NaN();
  const auto& a = *l.activation_params;
  kernels::quantizer qz;
  qz.scale = a.scale;
  qz.offset = static_cast<float>(a.offset);
  qz.qmin = -std::ldexp(1.0f, a.bits - 1);
  qz.qmax = std::ldexp(1.0f, a.bits - 1) - 1.0f;
  std::vector<float> before(x, x + n);
  k.fake_quant(before.data(), n, qz, x);
  return sqnr_db(before.data(), x, n);
}

namespace detail {

/// `e` as coming from the file `path`, unless it already names one.
[[nodiscard]] inline error from_file(error e, const std::string& path) {
  if (e.path.empty())
    e.path = path;
  return e;
}

}  // namespace detail

/// Runs the phases of `s` (created, nothing fed yet) from files: `batches` (at least the plan's
/// batch_num; each holds every quantizable layer's input under the layer's name) and, when the
/// session has AdaRound layers, `ada_samples` (each AdaRound layer's input samples under its
/// name, dim 0 the sample axis). Errors: a missing or unreadable tensor, named by file and
/// tensor; a tensor the session rejects (wrong channel count, NaN, ...), with the file as its
/// path; too few batches or no AdaRound samples.
template <class Source>
[[nodiscard]] result<file_calibration> calibrate_from_files(
    calibration_session& s, const std::vector<named_source<Source>>& batches,
    const named_source<Source>* ada_samples, const kernels::kernel_set& k) {
  const std::size_t need = s.plan().batch_num;
  if (batches.size() < need) {
    return make_error(errc::session_input_invalid,
                      "the config's batch_num is " + std::to_string(need) + " but only " +
                          std::to_string(batches.size()) + " batch file(s) were given");
  }
  const auto input = [&](const named_source<Source>& f,
                         const std::string& layer) -> decltype(f.source->get(layer)) {
    auto t = f.source->get(layer);
    if (!t) {
      auto e = detail::from_file(t.error(), f.path);
      e.note = "each batch file holds every quantizable layer's input under the layer's name";
      return e;
    }
    return t;
  };
  for (const auto& name : s.dmq_layers()) {  // the DMQ factors come from the first batch
    auto t = input(batches[0], name);
    if (!t)
      return t.error();
    const tensor_ref x{t.value().data.data(), t.value().shape, name + " input"};
    if (auto st = s.feed_dmq(name, x); !st)
      return detail::from_file(st.error(), batches[0].path);
  }
  if (auto st = s.quantize_weights(); !st)
    return st.error();
  if (const auto ada = s.ada_layers(); !ada.empty()) {
    if (ada_samples == nullptr || ada_samples->source == nullptr) {
      return make_error(errc::session_input_invalid,
                        "layer '" + ada.front() +
                            "' uses ada_quantize: its input samples are "
                            "needed");
    }
    for (const auto& name : ada) {
      auto t = ada_samples->source->get(name);
      if (!t) {
        auto e = detail::from_file(t.error(), ada_samples->path);
        e.note =
            "the AdaRound samples file holds each AdaRound layer's input samples under the "
            "layer's name";
        return e;
      }
      const tensor_ref x{t.value().data.data(), t.value().shape, name + " samples"};
      if (auto st = s.quantize_ada(name, x); !st)
        return detail::from_file(st.error(), ada_samples->path);
    }
  }
  struct kept_batch {
    std::vector<std::size_t> shape;
    std::vector<float> data;
  };
  std::vector<kept_batch> last(s.layers().size());  // the last batch, for the SQNR
  // The bounded memory mode reads every batch file again for its second pass.
  const std::size_t passes = s.activation_passes();
  for (std::size_t pb = 0; pb < passes * need; ++pb) {
    const std::size_t b = pb % need;
    for (std::size_t i = 0; i < s.layers().size(); ++i) {
      const auto& l = s.layers()[i];
      if (!l.plan.quant_enable)
        continue;
      auto t = input(batches[b], l.desc.name);
      if (!t)
        return t.error();
      const tensor_ref x{t.value().data.data(), t.value().shape, l.desc.name + " input"};
      if (auto st = s.feed(l.desc.name, x); !st)
        return detail::from_file(st.error(), batches[b].path);
      if (pb + 1 == passes * need)
        last[i] = {std::move(t.value().shape), std::move(t.value().data)};
    }
  }
  auto rec = s.record();
  if (!rec)
    return rec.error();
  file_calibration out;
  out.record = std::move(rec).value();
  out.activation_sqnr_db.assign(s.layers().size(), std::numeric_limits<double>::quiet_NaN());
  for (std::size_t i = 0; i < s.layers().size(); ++i) {
    const auto& l = s.layers()[i];
    auto& x = last[i];
    if (!l.activation_params || x.data.empty())
      continue;
    if (!l.balance_factors.empty()) {  // the layer sees its input divided by the factors
      if (auto st = dmq_apply_to_activation(x.data.data(), x.shape, l.desc.type, l.balance_factors);
          !st) {
        return detail::from_file(st.error(), batches[need - 1].path);
      }
    }
    out.activation_sqnr_db[i] = fake_quantize_input(l, x.data.data(), x.data.size(), k);
  }
  return out;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
