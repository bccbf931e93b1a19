// `ptq calibrate CONFIG --model M --weights W --batches B...`: a run from files, in one process
// or sharded over MPI ranks. It checks the inputs and outputs, loads the config, weights and
// manifest into a session, feeds the batches through the library's file-driven loop
// (ptq/session/calibrate_files.hpp) and writes every output all or nothing.
#include <chrono>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "calibrate_run.hpp"
#include "config_io.hpp"
#include "input_files.hpp"
#include "manifest_input.hpp"
#include "outputs.hpp"
#include "phase_timer.hpp"
#include "ptq/io/safetensors.hpp"
#include "ptq/session/calibrate_files.hpp"
#include "ptq/session/model_manifest.hpp"
#include "report_outputs.hpp"

#include "mpi_run.hpp"

namespace ptq_cli::calibrate {

namespace {

using batch_source = ptq::named_source<ptq::io::safetensors_file>;

/// The inputs of a run from files: CONFIG, --model, --weights, --batches, --ada-data,
/// --ada-float-data and --dmq-data.
std::vector<named_path> file_inputs(const calibrate_args& a) {
  std::vector<named_path> in = {
      {"CONFIG", a.config}, {"--model", a.model}, {"--weights", a.weights}};
  for (const auto& b : a.batches)
    in.push_back({"--batches", b});
  if (!a.ada_data.empty())
    in.push_back({"--ada-data", a.ada_data});
  if (!a.ada_float_data.empty())
    in.push_back({"--ada-float-data", a.ada_float_data});
  if (!a.dmq_data.empty())
    in.push_back({"--dmq-data", a.dmq_data});
  if (!a.onnx.empty())
    in.push_back({"--onnx", a.onnx});
  return in;
}

/// Every input is a file within its size limit, before any work.
ptq::result<> check_inputs(const std::vector<named_path>& inputs) {
  for (const auto& in : inputs) {
    const bool text = in.option == "CONFIG" || in.option == "--model";
    if (auto st =
            text ? ptq_cli::check_input_file(in.path, in.option.c_str(), ptq_cli::max_text_bytes)
                 : ptq_cli::check_tensor_file(in.path, in.option.c_str());
        !st) {
      return st;
    }
  }
  return {};
}

/// An input the config has no use for is named, not silently dropped (W1107).
void warn_unused_input(const char* option, const char* why) {
  std::cerr << ptq::format_error(
      ptq::make_warning(ptq::errc::input_ignored, std::string(option) + " is not read: " + why),
      "ptq calibrate");
}

/// What a run from files loads before the batches.
struct model_files {
  ptq_cli::loaded_config cfg;
  ptq::io::safetensors_file weights;
  ptq::model_manifest model;
  std::optional<ptq::io::safetensors_file> ada_samples;  ///< --ada-data, when a layer needs it
  std::optional<ptq::io::safetensors_file> ada_float;    ///< --ada-float-data, likewise
  std::optional<ptq::io::safetensors_file> dmq;          ///< --dmq-data, when a layer needs it

  /// The phase_sources over these files (`ada`, `ada_float` and `dmq` name them).
  [[nodiscard]] ptq::phase_sources<ptq::io::safetensors_file> sources(const calibrate_args& a,
                                                                      batch_source& ada,
                                                                      batch_source& floats,
                                                                      batch_source& dmq_src) const {
    ada = {a.ada_data, ada_samples ? &*ada_samples : nullptr};
    floats = {a.ada_float_data, ada_float ? &*ada_float : nullptr};
    dmq_src = {a.dmq_data, dmq ? &*dmq : nullptr};
    return {dmq ? &dmq_src : nullptr, &ada, ada_float ? &floats : nullptr};
  }
};

/// Loads the config, the weights and the manifest, and creates the session. An error whose
/// details are on stderr already (the config's or the session's diagnostics) sets `printed`.
ptq::result<std::pair<model_files, ptq::calibration_session>> load_model(
    const calibrate_args& a, ptq::session_options opt, bool& printed,
    ptq_cli::phase_timer* timer = nullptr) {
  const auto lap = [timer](std::string_view part) {
    if (timer != nullptr)
      timer->lap(part);
  };
  const auto cfg = ptq_cli::load_config(a.config, "calibrate");
  if (!cfg) {
    printed = true;
    return ptq::make_error(ptq::errc::shard_invalid, a.config + ": the config has errors");
  }
  auto weights = ptq_cli::read_tensor_input(a.weights, "--weights");
  if (!weights)
    return weights.error();
  auto parsed = ptq_cli::read_manifest_input(a.model, weights.value());
  if (!parsed)
    return parsed.error();
  model_files f{*cfg,
                std::move(weights).value(),
                std::move(parsed).value(),
                std::nullopt,
                std::nullopt,
                std::nullopt};
  // The session gets the layers. Only the exporters read the manifest's float weights after
  // this (the rest of the run names layers and tensors), so without --export the session
  // quantizes each weight where the manifest holds it instead of copying it.
  const bool keep_float_weights = !a.exports.empty();
  std::vector<ptq::layer_desc> descs;
  for (auto& m : f.model.layers) {
    descs.push_back(m.desc);
    if (!keep_float_weights && m.weight_values)  // the manifest's own: no one else reads it
      descs.back().weight_out = m.weight_values->data();
  }
  lap("load");
  auto created =
      ptq::calibration_session::create(f.cfg.parsed.value(), std::move(descs), std::move(opt));
  lap("fusion");  // creation ends with the fusions (it reports only the fused layers)
  print_session_diagnostics(created.diagnostics(), f.cfg.text, a.config, a.weights, &f.model);
  if (!created) {
    printed = true;
    return ptq::make_error(ptq::errc::shard_invalid,
                           "the session could not be created (config or layers)");
  }
  auto s = std::move(created).value();
  if (const auto ada = s.ada_layers(); !ada.empty()) {
    if (a.ada_data.empty()) {
      return ptq::make_error(
          ptq::errc::session_input_invalid,
          "layer '" + ada.front() +
              "' uses ada_quantize: give its input samples with --ada-data FILE");
    }
    auto samples = ptq_cli::read_tensor_input(a.ada_data, "--ada-data");
    if (!samples)
      return samples.error();
    f.ada_samples = std::move(samples).value();
    if (!a.ada_float_data.empty()) {
      auto floats = ptq_cli::read_tensor_input(a.ada_float_data, "--ada-float-data");
      if (!floats)
        return floats.error();
      f.ada_float = std::move(floats).value();
    }
  } else if (!a.ada_float_data.empty() || !a.ada_data.empty()) {
    warn_unused_input(!a.ada_data.empty() ? "--ada-data" : "--ada-float-data",
                      "no layer uses ada_quantize");
  }
  if (!s.dmq_layers().empty() && !a.dmq_data.empty()) {
    auto dmq = ptq_cli::read_tensor_input(a.dmq_data, "--dmq-data");
    if (!dmq)
      return dmq.error();
    f.dmq = std::move(dmq).value();
  } else if (!a.dmq_data.empty()) {
    warn_unused_input("--dmq-data", "no layer has dmq_balancer");
  }
  return std::pair<model_files, ptq::calibration_session>(std::move(f), std::move(s));
}

/// The batch files: every --batches path, opened where `wanted` (a null source elsewhere).
struct opened_batches {
  std::vector<ptq::io::safetensors_file> files;
  std::vector<batch_source> sources;
};

template <class Wanted>
ptq::result<opened_batches> open_batches(const calibrate_args& a, std::size_t count,
                                         Wanted wanted) {
  opened_batches out;
  out.files.reserve(count);  // the sources point into it
  for (std::size_t b = 0; b < count; ++b) {
    const ptq::io::safetensors_file* f = nullptr;
    if (wanted(b)) {
      auto r = ptq_cli::read_tensor_input(a.batches[b], "--batches");
      if (!r)
        return r.error();
      out.files.push_back(std::move(r).value());
      f = &out.files.back();
    }
    out.sources.push_back({a.batches[b], f});
  }
  return out;
}

/// Rank 0's (or the one process's) part after the calibration: write every output, all or
/// nothing.
ptq::result<> write_outputs(const calibrate_args& a, const ptq::calibration_session& s,
                            const model_files& f, const ptq::file_calibration& r) {
  auto out = render_outputs(a, s, r.record, f.weights, f.model, a.model,
                            ptq_cli::files_report_context(a, s, r, f.cfg.text));
  if (!out)
    return out.error();
  return ptq_cli::commit_outputs(out.value());
}

/// The toolkit reads batch_num batches; more files than that are named, not silently dropped.
void warn_extra_batches(const calibrate_args& a, std::size_t batch_num) {
  if (a.batches.size() <= batch_num)
    return;
  const std::size_t rest = a.batches.size() - batch_num - 1;
  const std::string unread =
      "'" + a.batches[batch_num] + "'" +
      (rest == 0 ? " is" : " and the " + std::to_string(rest) + " after it are");
  std::cerr << ptq::format_error(
      ptq::make_warning(ptq::errc::input_ignored,
                        "--batches: " + std::to_string(a.batches.size()) +
                            " files for the config's batch_num " + std::to_string(batch_num) +
                            ": " + unread + " not read",
                        "raise batch_num in the config to calibrate on more batches"),
      "ptq calibrate");
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int run_files(const calibrate_args& a, ptq::session_options opt, progress_printer& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto inputs = file_inputs(a);
  if (auto st = ptq_cli::check_outputs(outputs_of(a), inputs); !st)
    return fail(st.error());
  if (auto st = check_inputs(inputs); !st)
    return fail(st.error());
  ptq_cli::phase_timer timer;  // printed with --timings (a clock read per step otherwise)
  opt.on_progress = [&progress, &timer](const ptq::progress_event& e) {
    timer.lap(ptq_cli::phase_key(e.phase));
    progress(e);
  };
  const auto kernels = opt.kernels;
  bool printed = false;
  auto loaded = load_model(a, std::move(opt), printed, &timer);
  if (!loaded)
    return printed ? ptq_cli::exit_error : fail(loaded.error());
  auto& [f, s] = loaded.value();
  warn_extra_batches(a, s.plan().batch_num);
  const std::size_t need = std::min<std::size_t>(s.plan().batch_num, a.batches.size());
  auto batches = open_batches(a, need, [](std::size_t) { return true; });
  if (!batches)
    return fail(batches.error());
  timer.lap("open");
  batch_source ada, floats, dmq;
  auto r = ptq::calibrate_from_files(s, batches.value().sources, f.sources(a, ada, floats, dmq),
                                     kernels);
  if (!r)
    return fail(r.error());
  timer.lap("finish");  // the record and the input SQNR, after the last activation event
  if (auto st = write_outputs(a, s, f, r.value()); !st)
    return fail(st.error());
  timer.lap("outputs");
  if (a.timings)
    std::cerr << timer.line() << '\n';
  if (outputs_of(a).empty()) {
    std::cerr << "ptq calibrate: note: no output option (--record, --quant-config, "
                 "--fake-quant-weights, --report, --export): the results are printed, nothing was "
                 "written\n";
  }
  return ptq_cli::report(a, s, r.value().activation_sqnr_db, nullptr, seconds_since(t0));
}

#if PTQ_WITH_MPI
/// `ptq calibrate --mpi` (docs/scale-out.md): rank r of R feeds the batches b % R == r, the
/// states meet on rank 0 after each pass, rank 0 writes the outputs. Every rank takes part in
/// every exchange, also after a local error, so a failure anywhere ends every rank non-zero
/// with the error printed once, by rank 0; the other ranks print nothing.
int run_files_mpi(const calibrate_args& a, ptq::session_options opt, progress_printer& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const ptq::mpi_environment env;
  ptq::mpi_comm comm;
  const bool root = comm.rank() == 0;
  const ptq_cli::silenced_streams quiet(!root);
  opt.activation = {ptq::activation_mode::kind::sharded, {comm.rank(), comm.size()}};
  if (root)
    opt.on_progress = progress;
  // Every rank ends with the same error: that of the lowest failing rank, which rank 0 prints
  // (unless it is rank 0's own and printed already: the config's diagnostics).
  bool printed = false;
  const auto fail_all = [&](const ptq::error& e) -> int {
    if (root && !printed)
      fail(e);
    return ptq_cli::exit_error;
  };
  // A local error before the session exists takes the place of this rank's first exchange.
  const auto fail_early = [&](const ptq::error& e) -> int {
    return fail_all(ptq::shard_agree(comm, e).error());
  };
  const auto inputs = file_inputs(a);
  if (root) {
    if (auto st = ptq_cli::check_outputs(outputs_of(a), inputs); !st)
      return fail_early(st.error());
  }
  if (auto st = check_inputs(inputs); !st)
    return fail_early(st.error());
  const auto kernels = opt.kernels;
  auto loaded = load_model(a, std::move(opt), printed);
  if (!loaded)
    return fail_early(loaded.error());
  auto& [f, s] = loaded.value();
  if (root)
    warn_extra_batches(a, s.plan().batch_num);
  // This rank opens batch 0 (the DMQ factors), its own, and on rank 0 the last (the SQNR).
  const std::size_t need = std::min<std::size_t>(s.plan().batch_num, a.batches.size());
  auto batches = open_batches(a, need, [&](std::size_t b) {
    return b == 0 || b % comm.size() == comm.rank() || (root && b + 1 == need);
  });
  if (!batches)
    return fail_early(batches.error());
  batch_source ada, floats, dmq;
  auto r = ptq::calibrate_from_files_sharded(s, comm, batches.value().sources,
                                             f.sources(a, ada, floats, dmq), kernels);
  if (!r)  // every rank has it from an exchange
    return fail_all(r.error());
  const ptq::result<> written = root ? write_outputs(a, s, f, r.value()) : ptq::result<>();
  if (auto all = ptq::shard_agree(comm, written); !all)  // every rank exits as rank 0 does
    return fail_all(all.error());
  if (!root)
    return ptq_cli::exit_ok;
  return ptq_cli::report(a, s, r.value().activation_sqnr_db, nullptr, seconds_since(t0));
}
#endif

}  // namespace ptq_cli::calibrate
