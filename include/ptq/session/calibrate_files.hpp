// The file-driven calibration of `ptq calibrate --model` (docs/calibrate.md): every phase of a
// session fed from tensor files that hold each quantizable layer's input under the layer's
// name, written by the engine that ran the network. No network runs here: the DMQ factors come
// from the first batch, AdaRound learns each layer against its own float output on its samples,
// and every batch is observed as it was saved. The files come from any tensor source with
// `result<T> get(std::string_view name) const` (T with `shape` and `data`: a float32 copy), such
// as io::safetensors_file, so this header needs no io header; a source that also has
// `view(name)` (a result whose `view` is a tensor_view into the source) has its inputs read where
// they lie, float16 and bfloat16 converted a block at a time as they are observed.
// Every error names the file it comes from (error::path).
// Depends on: core and kernels.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptq/core/error.hpp"
#include "ptq/kernels/kernel_set.hpp"
#include "ptq/session/calibration_session.hpp"
#include "ptq/session/shard_exchange.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// A tensor source and the path it is reported under.
template <class Source>
struct named_source {
  std::string path;
  const Source* source = nullptr;
};

/// What a file-driven calibration reads besides its batches, each optional: the DMQ pass's
/// inputs (null: batch 0, as an engine that saved one set of inputs gives them), each AdaRound
/// layer's input samples, and those samples' inputs with every AdaRound layer in float, whose
/// float output is the layer's target (null: the samples themselves). An engine that ran its
/// phases as the toolkit does (ptq.torch with save_inputs) saves all three.
template <class Source>
struct phase_sources {
  const named_source<Source>* dmq = nullptr;
  const named_source<Source>* ada_samples = nullptr;
  const named_source<Source>* ada_float = nullptr;
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
/// parameters yet. `scratch`, when given, holds the copy of the input (a buffer reused over
/// layers allocates once).
[[nodiscard]] inline double fake_quantize_input(const session_layer& l, float* x, std::size_t n,
                                                const kernels::kernel_set& k,
                                                std::vector<float>* scratch = nullptr) {
  if (!l.activation_params)
    return std::numeric_limits<double>::quiet_NaN();
  const auto& a = *l.activation_params;
  kernels::quantizer qz;
  qz.scale = a.scale;
  qz.offset = static_cast<float>(a.offset);
  qz.qmin = -std::ldexp(1.0f, a.bits - 1);
  qz.qmax = std::ldexp(1.0f, a.bits - 1) - 1.0f;
  std::vector<float> own;
  std::vector<float>& before = scratch != nullptr ? *scratch : own;  // the caller's, reused
  before.assign(x, x + n);
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

/// Whether Source has `view(name)`: a result whose `view` is a tensor_view into the source
/// (io::safetensors_file::view), so an input needs no copy.
template <class Source, class = void>
struct has_view : std::false_type {};
template <class Source>
struct has_view<Source,
                std::void_t<decltype(std::declval<const Source&>().view(std::string_view{}))>>
    : std::true_type {};

/// `s.view(name)` when Source has view(), else `s.get(name)` (a copy).
template <class Source>
[[nodiscard]] auto fetch_tensor(const Source& s, std::string_view name) {
  if constexpr (has_view<Source>::value) {
    return s.view(name);
  } else {
    return s.get(name);
  }
}

/// What fetch_tensor gave, as a tensor_view named `name`.
template <class Fetched>
[[nodiscard]] tensor_view input_view(const Fetched& t, std::string name) {
  tensor_view v;
  if constexpr (std::is_same_v<std::decay_t<decltype(t.view)>, tensor_view>) {
    v = t.view;
  } else {
    v = view_of(t.data.data(), t.shape);
  }
  v.name = std::move(name);
  return v;
}

/// Layer `layer`'s input in file `f`, read-only and in place where the source can (through
/// `fetch`, by default fetch_tensor), or an error naming the file and the tensor.
template <class Source>
[[nodiscard]] auto layer_input(const named_source<Source>& f, const std::string& layer)
    -> decltype(fetch_tensor(*f.source, layer)) {
  if (f.source == nullptr) {
    return make_error(errc::session_call_invalid,
                      f.path + ": the batch file was not opened on this process");
  }
  auto t = fetch_tensor(*f.source, layer);
  if (!t) {
    auto e = from_file(t.error(), f.path);
    e.note = "each batch file holds every quantizable layer's input under the layer's name";
    return e;
  }
  return t;
}

[[nodiscard]] inline result<> enough_batches(const calibration_session& s, std::size_t given) {
  const std::size_t need = s.plan().batch_num;
  if (given < need) {
    return make_error(errc::session_input_invalid,
                      "the config's batch_num is " + std::to_string(need) + " but only " +
                          std::to_string(given) + " batch file(s) were given");
  }
  return {};
}

/// The AdaRound layer `name`'s tensor in `src` (the samples or their float inputs), or an
/// error naming the file.
template <class Source>
[[nodiscard]] auto ada_tensor(const named_source<Source>& src, const std::string& name)
    -> decltype(fetch_tensor(*src.source, name)) {
  auto t = fetch_tensor(*src.source, name);
  if (!t) {
    auto e = from_file(t.error(), src.path);
    e.note =
        "the AdaRound samples file holds each AdaRound layer's input samples under the layer's "
        "name";
    return e;
  }
  return t;
}

/// Phases 2 and 3: the DMQ factors from `extra.dmq` (or `first`, batch 0), the weights, the
/// AdaRound layers from `extra.ada_samples` (their targets from `extra.ada_float`).
template <class Source>
[[nodiscard]] result<> weights_from_files(calibration_session& s, const named_source<Source>& first,
                                          const phase_sources<Source>& extra) {
  const named_source<Source>& dmq = extra.dmq != nullptr ? *extra.dmq : first;
  for (const auto& name : s.dmq_layers()) {
    auto t = layer_input(dmq, name);
    if (!t)
      return t.error();
    if (auto st = s.feed_dmq(name, input_view(t.value(), name + " input")); !st)
      return from_file(st.error(), dmq.path);
  }
  if (auto st = s.quantize_weights(); !st)
    return st;
  const auto ada = s.ada_layers();
  if (ada.empty())
    return {};
  const auto* samples = extra.ada_samples;
  if (samples == nullptr || samples->source == nullptr) {
    return make_error(
        errc::session_input_invalid,
        "layer '" + ada.front() + "' uses ada_quantize: its input samples are needed");
  }
  const auto* floats =
      extra.ada_float != nullptr && extra.ada_float->source != nullptr ? extra.ada_float : nullptr;
  for (const auto& name : ada) {
    auto t = ada_tensor(*samples, name);
    if (!t)
      return t.error();
    const tensor_view x = input_view(t.value(), name + " samples");
    if (floats == nullptr) {
      if (auto st = s.quantize_ada(name, x); !st)
        return from_file(st.error(), samples->path);
      continue;
    }
    auto f = ada_tensor(*floats, name);
    if (!f)
      return f.error();
    const tensor_view xf = input_view(f.value(), name + " float samples");
    if (auto st = s.quantize_ada(name, x, &xf); !st)
      return from_file(st.error(), samples->path);
  }
  return {};
}

/// Feeds every enabled layer's input from each of `files`, in order.
template <class Source>
[[nodiscard]] result<> feed_files(calibration_session& s,
                                  const std::vector<const named_source<Source>*>& files) {
  for (const auto* f : files) {
    for (const auto& l : s.layers()) {
      if (!l.plan.quant_enable)
        continue;
      auto t = layer_input(*f, l.desc.name);
      if (!t)
        return t.error();
      const result<> st = s.feed(l.desc.name, input_view(t.value(), l.desc.name + " input"));
      if (!st)
        return from_file(st.error(), f->path);
    }
  }
  return {};
}

/// Per layer (session order), the SQNR of its quantize-dequantized input in `last` (divided by
/// its DMQ factors first); NaN for layers that are not quantized.
template <class Source>
[[nodiscard]] result<std::vector<double>> input_sqnr(const calibration_session& s,
                                                     const named_source<Source>& last,
                                                     const kernels::kernel_set& k) {
  std::vector<double> out(s.layers().size(), std::numeric_limits<double>::quiet_NaN());
  std::vector<float> x, before;  // reused over the layers: two allocations in all
  for (std::size_t i = 0; i < s.layers().size(); ++i) {
    const auto& l = s.layers()[i];
    if (!l.activation_params)
      continue;
    auto t = layer_input(last, l.desc.name);
    if (!t)
      return t.error();
    const tensor_view in = input_view(t.value(), l.desc.name + " input");
    x.resize(in.size());
    in.convert(0, x.size(), x.data());
    if (auto st = divide_by_balance_factors(l, x.data(), in.shape); !st)
      return from_file(st.error(), last.path);
    out[i] = fake_quantize_input(l, x.data(), x.size(), k, &before);
  }
  return out;
}

}  // namespace detail

/// Runs the phases of `s` (created, nothing fed yet) from files: `batches` (at least the plan's
/// batch_num; each holds every quantizable layer's input under the layer's name) and `extra`
/// (phase_sources: the DMQ inputs, and when the session has AdaRound layers each one's input
/// samples under its name, dim 0 the sample axis). Errors: a missing or unreadable tensor,
/// named by file and tensor; a tensor the session rejects (wrong channel count, NaN, ...), with
/// the file as its path; too few batches or no AdaRound samples. The bounded memory mode reads
/// every batch file twice.
template <class Source>
[[nodiscard]] result<file_calibration> calibrate_from_files(
    calibration_session& s, const std::vector<named_source<Source>>& batches,
    const phase_sources<Source>& extra, const kernels::kernel_set& k) {
  if (auto st = detail::enough_batches(s, batches.size()); !st)
    return st.error();
  if (auto st = detail::weights_from_files(s, batches[0], extra); !st)
    return st.error();
  const std::size_t need = s.plan().batch_num;
  std::vector<const named_source<Source>*> files;
  for (std::size_t b = 0; b < need; ++b)
    files.push_back(&batches[b]);
  for (std::size_t pass = 0; pass < s.activation_passes(); ++pass) {
    if (auto st = detail::feed_files(s, files); !st)
      return st.error();
  }
  auto rec = s.record();
  if (!rec)
    return rec.error();
  auto sqnr = detail::input_sqnr(s, batches[need - 1], k);
  if (!sqnr)
    return sqnr.error();
  return file_calibration{std::move(rec).value(), std::move(sqnr).value()};
}

/// calibrate_from_files on one of `comm.size()` processes (`s` made with the sharded activation
/// mode, rank comm.rank() of comm.size()): every rank runs phases 2 and 3 alike (the DMQ factors
/// from batch 0, the weights, AdaRound), feeds its own batches (b % size == rank) twice and
/// exchanges the states after each pass (shard_exchange.hpp). `batches` lists every batch; a rank
/// needs only batch 0, its own and, on rank 0, the last (the SQNR) opened (a null source
/// elsewhere). No rank returns before the exchanges: a local error travels through them, and every
/// rank returns the lowest failing rank's error. Otherwise every rank returns the record, and rank
/// 0 the SQNR too (empty on the others).
template <class Source, class Comm>
[[nodiscard]] result<file_calibration> calibrate_from_files_sharded(
    calibration_session& s, Comm& comm, const std::vector<named_source<Source>>& batches,
    const phase_sources<Source>& extra, const kernels::kernel_set& k) {
  result<> local = detail::enough_batches(s, batches.size());
  if (local)
    local = detail::weights_from_files(s, batches[0], extra);
  const std::size_t need = s.plan().batch_num;
  std::vector<const named_source<Source>*> own;
  for (std::size_t b = comm.rank(); b < need && b < batches.size(); b += comm.size())
    own.push_back(&batches[b]);
  for (int pass = 1; pass <= 2; ++pass) {
    if (local)
      local = detail::feed_files(s, own);
    if (auto st = exchange_shard_states(s, comm, local); !st)
      return st.error();
  }
  auto rec = s.record();
  if (!rec)
    return rec.error();
  file_calibration out{std::move(rec).value(), {}};
  if (comm.rank() == 0) {
    auto sqnr = detail::input_sqnr(s, batches[need - 1], k);
    if (!sqnr)
      return sqnr.error();
    out.activation_sqnr_db = std::move(sqnr).value();
  }
  return out;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
