// `ptq calibrate`: calibrate a whole model and write the toolkit's record, the detailed JSON
// config and the fake-quantized weights. With no model files it calibrates the bundled digits
// model (calibrate_bundled.cpp) and reports FP32 and quantized accuracy; with --model, --weights
// and --batches it runs from files (calibrate_files.cpp). This file is the command line: the
// options, the checks of their combinations, and which run they select.
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "bounded_observe.hpp"
#include "bundled_data.hpp"
#include "calibrate_run.hpp"
#include "command.hpp"
#include "export_files.hpp"
#include "mpi_run.hpp"
#include "numeric_io.hpp"
#include "outputs.hpp"
#include "report_outputs.hpp"

namespace {

using ptq_cli::calibrate_args;
using namespace ptq_cli::calibrate;  // calibrate_run.hpp

const std::string calibrate_help =
    std::string(
        "Calibrate a model and write the toolkit's record, the detailed JSON config and the "
        "fake-quantized weights.\n\n"
        "  ptq calibrate                        the bundled digits model with the bundled "
        "quant.cfg;\n"
        "                                       outputs go to a new ptq-calibrate-* folder in "
        "the\n"
        "                                       temporary directory unless an output option is "
        "given\n"
        "  ptq calibrate CONFIG                 the bundled digits model with CONFIG (a quick "
        "way to\n"
        "                                       try a config; it does not calibrate your model)\n"
        "  ptq calibrate CONFIG --model M --weights W --batches B...\n"
        "                                       your model, from files (docs/calibrate.md)\n\n"
        "Every output is checked before calibration starts and written all or nothing; an "
        "output may not be an input or another output.\n") +
    ptq_cli::bundled_search_text;

void add_calibrate_options(CLI::App& sub, calibrate_args& a) {
  sub.add_option("CONFIG", a.config,
                 "simple config (.cfg); default: the bundled quant.cfg; without --model it "
                 "calibrates the bundled digits model");
  sub.add_option("--model", a.model, "model manifest (JSON; see docs/calibrate.md)");
  sub.add_option("--weights", a.weights, "weights (.safetensors) named by the manifest");
  sub.add_option("--batches", a.batches,
                 "calibration batches (.safetensors), each with every quantizable layer's "
                 "input under the layer's name; batch_num of them")
      ->expected(1, -1);
  sub.add_option("--record", a.record, "write the toolkit's record file here");
  sub.add_option("--quant-config", a.quant_config, "write the detailed JSON config here");
  sub.add_option("--fake-quant-weights", a.fake_quant_weights,
                 "write the fake-quantized weights (.safetensors) here");
  sub.add_option("--export", a.exports,
                 "also export the record: FORMAT=OUT (repeatable; trt-cache:VERSION=OUT, "
                 "onnx-qdq[:ENGINE]=OUT and onnx=OUT with --onnx; docs/export.md)")
      ->check([](const std::string& v) {
        auto r = ptq_cli::parse_export_spec(v);
        return r ? std::string() : r.error().message;
      });
  sub.add_option("--onnx", a.onnx,
                 "the model as float ONNX: --export writes onnx-qdq and onnx models from it "
                 "and keys the other formats by its calibrated graph (docs/deploy.md)");
  sub.add_option("--ada-data", a.ada_data,
                 "AdaRound samples (.safetensors): each ada_quantize layer's input samples "
                 "under the layer's name (dim 0 is the sample axis)");
  sub.add_option("--ada-float-data", a.ada_float_data,
                 "the AdaRound samples' inputs with every AdaRound layer in float "
                 "(.safetensors, as --ada-data): each layer's target is its float output on "
                 "them (default: on --ada-data)");
  sub.add_option("--dmq-data", a.dmq_data,
                 "the DMQ pass's inputs (.safetensors, each dmq_balancer layer's input under "
                 "its name, from the float model; default: the first of --batches)");
  sub.add_option("--seed", a.seed, "AdaRound minibatch seed (default 0)")
      ->check(CLI::NonNegativeNumber);  // CLI11 would wrap "-3" to 2^64 - 3
  sub.add_option("--threads", a.threads,
                 "threads for the kernels (default: all cores; "
                 "results are identical for every count)");
  sub.add_option("--report", a.report,
                 "write the calibration report here: one self-contained HTML page "
                 "(docs/report.md)");
  sub.add_option("--report-json", a.report_json,
                 "write the calibration report's data here as JSON (docs/report.md)");
  sub.add_option("--memory", a.memory,
                 "activation calibration in one pass or in two bounded-memory passes over "
                 "the batches (the same results)")
      ->check(CLI::IsMember({"one-pass", "bounded"}))
      ->capture_default_str();
  sub.add_flag("--order-invariant", a.order_invariant,
               "HFMG layers: a histogram whose bytes do not depend on the batch order (not "
               "the toolkit's numbers; docs/scale-out.md)");
  sub.add_flag("--mpi", a.mpi,
               "shard the activation calibration over the MPI ranks of mpirun (needs "
               "--model; rank 0 writes the outputs; docs/scale-out.md)");
  sub.add_option("--auto-accuracy", a.auto_accuracy,
                 "the bundled model: keep the fewest most sensitive layers in float so that the "
                 "test accuracy drops at most DROP points (the toolkit's accuracy-based "
                 "automatic calibration, docs/calibrate.md)")
      ->check(CLI::NonNegativeNumber);
  sub.add_flag("--json", a.json, "print the per-layer table as JSON");
  sub.add_flag("--quiet", a.quiet, "no progress output");
  sub.add_flag("--timings", a.timings,
               "print the wall time of each part of the run on stderr (model files only)");
}

/// Whether the run is on the user's model files (any of --model, --weights, --batches given).
[[nodiscard]] bool from_files(const calibrate_args& a) noexcept {
  return !a.model.empty() || !a.weights.empty() || !a.batches.empty();
}

/// What is wrong with the combination of options, or empty: all checked before any work.
[[nodiscard]] std::string usage_problem(const calibrate_args& a) {
  const bool report = ptq_cli::wants_report(a);
  const bool bounded = ptq_cli::is_bounded(a.memory);
  if (a.order_invariant && (bounded || a.mpi || report))
    return "--order-invariant is one pass: not with --memory bounded, --mpi or --report";
  // The report shows each search's histogram and losses, which the bounded mode never holds
  // (it keeps only what the result needs).
  if (report && bounded)
    return "--report and --report-json need --memory one-pass";
  if (a.timings && (a.mpi || a.model.empty()))
    return "--timings times a run from model files (--model), without --mpi";
  if (a.mpi && a.model.empty())
    return "--mpi shards a model from files: give --model, --weights and --batches";
  if (!a.onnx.empty() && a.exports.empty())
    return "--onnx is read by --export only: add --export FORMAT=OUT";
  for (const auto& spec : a.exports) {
    const auto r = ptq_cli::parse_export_spec(spec);
    if (r && ptq_cli::is_onnx_model_format(r->format) && a.onnx.empty()) {
      return "--export '" + spec + "': " + r->format +
             " rewrites the float ONNX model of your model; give it with --onnx MODEL.onnx";
    }
  }
  if (!from_files(a)) {
    for (const auto& [option, value] :
         {std::pair{"--ada-data", &a.ada_data}, std::pair{"--ada-float-data", &a.ada_float_data},
          std::pair{"--dmq-data", &a.dmq_data}}) {
      if (!value->empty()) {
        return std::string(option) +
               " goes with --model/--weights/--batches; the bundled example computes its "
               "layers' inputs from its calibration images";
      }
    }
    return {};
  }
  if (a.auto_accuracy >= 0.0) {
    return "--auto-accuracy needs an evaluation, which the bundled model has (its test split) "
           "and files do not: from Python, ptq.torch.auto_calibrate and "
           "ptq.amct.accuracy_based_auto_calibration take your evaluator (docs/python.md)";
  }
  if (!a.ada_float_data.empty() && a.ada_data.empty())
    return "--ada-float-data goes with --ada-data (the samples whose targets it gives)";
  for (const auto& b : a.batches) {
    if (std::filesystem::path(b).extension() == ".cfg") {
      return "--batches: '" + b +
             "' is a config: --batches reads every file after it, so give CONFIG first (ptq "
             "calibrate CONFIG --model M --weights W --batches B...)";
    }
  }
  if (a.config.empty())
    return "give the CONFIG file with --model, before the options (--batches reads every file "
           "after it)";
  if (a.model.empty() || a.weights.empty() || a.batches.empty())
    return "CONFIG with model files needs all of --model, --weights and --batches (or no model "
           "files at all for the bundled example)";
  if (a.mpi && report)
    return "--report and --report-json need a run without --mpi";
  return {};
}

/// The session's options from the command line.
[[nodiscard]] ptq::session_options session_options_of(const calibrate_args& a,
                                                      const ptq_cli::progress_printer& p) {
  ptq::session_options opt;
  opt.threads = a.threads != 0 ? a.threads : std::max(1U, std::thread::hardware_concurrency());
  opt.on_ada_progress = p;
  opt.ada_report_every = p.tty ? 50 : 1000;
  opt.kernels = ptq_cli::numeric_kernels();  // the best arch of this CPU
  opt.ada_seed = a.seed;
  opt.keep_search_stats = ptq_cli::wants_report(a);
  using kind = ptq::activation_mode::kind;
  opt.activation.pass = a.order_invariant               ? kind::order_invariant
                        : ptq_cli::is_bounded(a.memory) ? kind::bounded
                                                        : kind::one_pass;
  return opt;
}

int run_calibrate(const calibrate_args& a) {
  if (const auto problem = usage_problem(a); !problem.empty())
    return fail_usage(problem);
  ptq_cli::install_interrupt_cleanup("ptq calibrate");
  ptq_cli::progress_printer p;
  p.quiet = a.quiet;
  auto opt = session_options_of(a, p);
  if (!from_files(a))
    return run_bundled(a, std::move(opt), p);
  if (a.mpi) {
#if PTQ_WITH_MPI
    return run_files_mpi(a, std::move(opt), p);
#else
    return fail(ptq_cli::mpi_unavailable());
#endif
  }
  return run_files(a, std::move(opt), p);
}

}  // namespace

ptq_cli::command_def ptq_cli::calibrate_command() {
  return {"calibrate",
          "Calibrate a model: record, detailed JSON config, fake-quantized weights (no model "
          "files: the bundled digits model)",
          [](CLI::App& sub) -> ptq_cli::run_fn {
            auto a = std::make_shared<calibrate_args>();
            sub.footer(calibrate_help);  // `ptq --help` lists the summary
            add_calibrate_options(sub, *a);
            return [a]() -> int { return run_calibrate(*a); };
          }};
}
