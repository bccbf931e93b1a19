// `ptq calibrate`: calibrate a whole model and write the toolkit's record, the detailed JSON
// config and the fake-quantized weights. With no model files it calibrates the bundled digits
// model (bundled_model.hpp) and reports FP32 and quantized accuracy; with --model, --weights and
// --batches the library's file-driven loop (ptq/session/calibrate_files.hpp) runs the phases.
// This file checks the command line, the inputs and the outputs, and wires the pieces.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bundled_data.hpp"
#include "bundled_model.hpp"
#include "calibrate_report.hpp"
#include "command.hpp"
#include "config_io.hpp"
#include "export_files.hpp"
#include "input_files.hpp"
#include "numeric_io.hpp"
#include "outputs.hpp"
#include "ptq/config.hpp"
#include "ptq/config_json.hpp"
#include "ptq/io/safetensors.hpp"
#include "ptq/session/calibrate_files.hpp"
#include "ptq/session/export.hpp"
#include "ptq/session/manifest.hpp"
#include "ptq/session/record.hpp"

namespace fs = std::filesystem;

namespace {

using ptq_cli::calibrate_args;
using ptq_cli::named_path;

/// An error naming a file renders as `path: error: ...`; any other as `ptq calibrate: error:`.
int fail(const ptq::error& e) {
  if (e.path.empty())
    std::cerr << "ptq calibrate: ";
  std::cerr << ptq::format_error(e);
  return ptq_cli::exit_error;
}

int fail_usage(const std::string& message) {
  std::cerr << "ptq calibrate: error: " << message << '\n';
  return ptq_cli::exit_usage;
}

ptq::error in_file(ptq::error e, const std::string& path) {
  if (e.path.empty())
    e.path = path;
  return e;
}

std::vector<named_path> outputs_of(const calibrate_args& a) {
  std::vector<named_path> out;
  if (!a.record.empty())
    out.push_back({"--record", a.record});
  if (!a.quant_config.empty())
    out.push_back({"--quant-config", a.quant_config});
  if (!a.fake_quant_weights.empty())
    out.push_back({"--fake-quant-weights", a.fake_quant_weights});
  ptq_cli::add_export_paths(a.exports, out);
  return out;
}

/// The contents of every requested output.
ptq::result<std::vector<ptq_cli::output_file>> render_outputs(
    const calibrate_args& a, const ptq::calibration_session& s, const ptq::record_file& rec,
    const ptq::io::safetensors_file& weights, const ptq::model_manifest& model) {
  std::vector<ptq_cli::output_file> out;
  if (!a.record.empty())
    out.push_back({{"--record", a.record}, ptq::write_record(rec)});
  if (!a.quant_config.empty())
    out.push_back({{"--quant-config", a.quant_config}, ptq::to_toolkit_json(s.plan())});
  if (!a.fake_quant_weights.empty()) {
    auto t = ptq::fake_quant_weights(s, model, weights);
    if (!t)
      return t.error();
    std::vector<ptq::io::named_tensor> tensors;
    for (auto& x : t.value())
      tensors.push_back({std::move(x.name), std::move(x.shape), std::move(x.data)});
    out.push_back(
        {{"--fake-quant-weights", a.fake_quant_weights}, ptq::io::format_safetensors(tensors)});
  }
  if (auto st = ptq_cli::add_exports(a.exports, rec, model, s.plan(), out); !st)
    return ptq::result<std::vector<ptq_cli::output_file>>(st.diagnostics());
  return out;
}

/// Prints the session's diagnostics: a layer that does not fit (E801) is blamed on the weights
/// file and the tensors the manifest names, the rest (resolution) on the config.
void print_session_diagnostics(const std::vector<ptq::error>& diags, const std::string& config_text,
                               const std::string& config_path, const std::string& weights_path,
                               const ptq::model_manifest* model) {
  for (const auto& d : diags) {
    if (d.code != ptq::errc::session_layer_invalid) {
      std::cerr << ptq::format_diagnostic(d, config_text, config_path);
      continue;
    }
    auto e = d;
    e.path = weights_path;
    if (model != nullptr) {
      for (const auto& m : model->layers) {
        if (e.message.rfind("layer '" + m.desc.name + "'", 0) == 0 && !m.weight_name.empty()) {
          e.note = "the layer's weight is tensor '" + m.weight_name + "'" +
                   (m.bias_name.empty() ? "" : ", its bias '" + m.bias_name + "'") +
                   " (names from the manifest)";
        }
      }
    }
    std::cerr << ptq::format_error(e);
  }
}

/// Loads the bundled digits model and its images from `dir` (digits/ of the bundled data).
ptq::result<ptq_cli::bundled_model> load_bundled(const fs::path& dir) {
  ptq_cli::bundled_model m;
  const std::string weights_path = (dir / "model.safetensors").string();
  auto w = ptq_cli::read_tensor_input(weights_path, "bundled weights");
  if (!w)
    return w.error();
  m.weights = std::move(w).value();
  const std::string manifest_path = (dir / "manifest.json").string();
  auto text = ptq_cli::read_text_input(manifest_path, "bundled manifest");
  if (!text)
    return text.error();
  auto parsed = ptq::parse_manifest(text.value(), m.weights);
  if (!parsed)
    return in_file(parsed.error(), manifest_path);
  m.model = std::move(parsed).value();
  const auto images = [&](const char* file, ptq_cli::batch_tensor& x,
                          std::vector<float>* labels) -> ptq::result<> {
    const std::string path = (dir / file).string();
    auto f = ptq_cli::read_tensor_input(path, "bundled images");
    if (!f)
      return f.error();
    const auto& src = f.value();
    auto t = src.get("images");
    if (!t)
      return in_file(t.error(), path);
    x = {std::move(t.value().shape), std::move(t.value().data)};
    if (labels) {
      auto l = src.get("labels");
      if (!l)
        return in_file(l.error(), path);
      *labels = std::move(l.value().data);
    }
    return {};
  };
  if (auto st = images("calib.safetensors", m.calib, nullptr); !st)
    return st.error();
  if (auto st = images("test.safetensors", m.test, &m.test_labels); !st)
    return st.error();
  return m;
}

/// A temporary folder for the outputs of a run that names none; removed when the run fails or
/// is interrupted before writing into it.
struct output_folder {
  std::string path;
  bool keep = false;
  ~output_folder() {
    if (!path.empty() && !keep)
      ::rmdir(path.c_str());
  }
};

int run_bundled(calibrate_args a, ptq::session_options opt, ptq_cli::progress_printer& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path data = ptq_cli::find_bundled_data();
  if (data.empty()) {
    return fail(ptq::make_error(ptq::errc::bundled_data_not_found,
                                "cannot find the bundled data (configs/quant.cfg, digits/)",
                                ptq_cli::bundled_search_text));
  }
  if (a.config.empty())
    a.config = (data / "configs" / "quant.cfg").string();
  const auto digits = data / "digits";
  std::vector<named_path> inputs = {{"CONFIG", a.config}};
  for (const char* f :
       {"model.safetensors", "manifest.json", "calib.safetensors", "test.safetensors"}) {
    inputs.push_back({"the bundled data", (digits / f).string()});
  }
  const auto cfg = ptq_cli::load_config(a.config, "calibrate");
  if (!cfg)
    return ptq_cli::exit_error;
  opt.on_progress = progress;
  output_folder folder;
  if (a.record.empty() && a.quant_config.empty() && a.fake_quant_weights.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "ptq-calibrate-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return fail(ptq::make_error(ptq::errc::output_not_writable,
                                  "cannot create a temporary folder '" + tmpl + "'"));
    }
    folder.path = tmpl;
    ptq_cli::cleanup_folder_on_signal(tmpl);
    a.record = tmpl + "/record.txt";
    a.quant_config = tmpl + "/quant_config.json";
    a.fake_quant_weights = tmpl + "/fake_quant_weights.safetensors";
    if (!a.json)
      std::cout << "outputs go to " << tmpl << "\n" << std::flush;
  } else if (auto st = ptq_cli::check_outputs(outputs_of(a), inputs); !st) {
    return fail(st.error());
  }
  auto model = load_bundled(digits);
  if (!model)
    return fail(model.error());
  if (!a.json) {
    std::cout << "calibrating the bundled digits CNN (" << model.value().model.layers.size()
              << " quantizable layers) with " << a.config << "\n\n";
  }
  std::vector<ptq::layer_desc> descs;
  for (const auto& l : model.value().model.layers)
    descs.push_back(l.desc);
  const auto kernels = opt.kernels;
  const unsigned threads = opt.threads;
  auto created = ptq::calibration_session::create(cfg->parsed.value(), descs, std::move(opt));
  print_session_diagnostics(created.diagnostics(), cfg->text, a.config,
                            (digits / "model.safetensors").string(), &model.value().model);
  if (!created)
    return ptq_cli::exit_error;
  auto s = std::move(created).value();
  auto r = ptq_cli::calibrate_bundled(s, model.value(), 32, threads, kernels);
  if (!r)
    return fail(r.error());
  const auto& res = r.value();
  auto files = render_outputs(a, s, res.record, model.value().weights, model.value().model);
  if (!files)
    return fail(files.error());
  if (auto st = ptq_cli::commit_outputs(files.value()); !st)
    return fail(st.error());
  folder.keep = true;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return ptq_cli::report(a, s, res.activation_sqnr_db, &res.fp32_accuracy, &res.quant_accuracy,
                         secs);
}

int run_files(const calibrate_args& a, ptq::session_options opt,
              ptq_cli::progress_printer& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<named_path> inputs = {
      {"CONFIG", a.config}, {"--model", a.model}, {"--weights", a.weights}};
  for (const auto& b : a.batches)
    inputs.push_back({"--batches", b});
  if (!a.ada_data.empty())
    inputs.push_back({"--ada-data", a.ada_data});
  if (auto st = ptq_cli::check_outputs(outputs_of(a), inputs); !st)
    return fail(st.error());
  for (const auto& in : inputs) {  // every input is a file within the limit, before any work
    const bool text = in.option == "CONFIG" || in.option == "--model";
    if (auto st =
            text ? ptq_cli::check_input_file(in.path, in.option.c_str(), ptq_cli::max_text_bytes)
                 : ptq_cli::check_tensor_file(in.path, in.option.c_str());
        !st) {
      return fail(st.error());
    }
  }
  const auto cfg = ptq_cli::load_config(a.config, "calibrate");
  if (!cfg)
    return ptq_cli::exit_error;
  opt.on_progress = progress;
  auto weights = ptq_cli::read_tensor_input(a.weights, "--weights");
  if (!weights)
    return fail(weights.error());
  auto manifest_text = ptq_cli::read_text_input(a.model, "--model");
  if (!manifest_text)
    return fail(manifest_text.error());
  auto parsed = ptq::parse_manifest(manifest_text.value(), weights.value());
  if (!parsed)
    return fail(in_file(parsed.error(), a.model));
  const ptq::model_manifest model = std::move(parsed).value();
  std::vector<ptq::layer_desc> descs;
  for (const auto& m : model.layers)
    descs.push_back(m.desc);
  const auto kernels = opt.kernels;
  auto created = ptq::calibration_session::create(cfg->parsed.value(), descs, std::move(opt));
  print_session_diagnostics(created.diagnostics(), cfg->text, a.config, a.weights, &model);
  if (!created)
    return ptq_cli::exit_error;
  auto s = std::move(created).value();
  if (const auto ada = s.ada_layers(); !ada.empty() && a.ada_data.empty()) {
    return fail(ptq::make_error(ptq::errc::session_input_invalid,
                                "layer '" + ada.front() +
                                    "' uses ada_quantize: give its input samples with --ada-data "
                                    "FILE"));
  }
  const std::size_t need = std::min<std::size_t>(s.plan().batch_num, a.batches.size());
  std::vector<ptq::io::safetensors_file> batch_files;
  batch_files.reserve(need);
  for (std::size_t b = 0; b < need; ++b) {
    auto f = ptq_cli::read_tensor_input(a.batches[b], "--batches");
    if (!f)
      return fail(f.error());
    batch_files.push_back(std::move(f).value());
  }
  std::vector<ptq::named_source<ptq::io::safetensors_file>> batches;
  for (std::size_t b = 0; b < need; ++b)
    batches.push_back({a.batches[b], &batch_files[b]});
  std::optional<ptq::io::safetensors_file> ada_file;
  std::optional<ptq::named_source<ptq::io::safetensors_file>> ada;
  if (!s.ada_layers().empty()) {
    auto f = ptq_cli::read_tensor_input(a.ada_data, "--ada-data");
    if (!f)
      return fail(f.error());
    ada_file = std::move(f).value();
    ada = ptq::named_source<ptq::io::safetensors_file>{a.ada_data, &*ada_file};
  }
  auto r = ptq::calibrate_from_files(s, batches, ada ? &*ada : nullptr, kernels);
  if (!r)
    return fail(r.error());
  auto files = render_outputs(a, s, r.value().record, weights.value(), model);
  if (!files)
    return fail(files.error());
  if (auto st = ptq_cli::commit_outputs(files.value()); !st)
    return fail(st.error());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return ptq_cli::report(a, s, r.value().activation_sqnr_db, nullptr, nullptr, secs);
}

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

const ptq_cli::register_command reg{
    {"calibrate",
     "Calibrate a model: record, detailed JSON config, fake-quantized weights (no model "
     "files: the bundled digits model)",
     5, [](CLI::App& sub) -> ptq_cli::run_fn {
       auto a = std::make_shared<calibrate_args>();
       sub.description(calibrate_help);
       sub.add_option("CONFIG", a->config,
                      "simple config (.cfg); default: the bundled quant.cfg; without --model it "
                      "calibrates the bundled digits model");
       sub.add_option("--model", a->model, "model manifest (JSON; see docs/calibrate.md)");
       sub.add_option("--weights", a->weights, "weights (.safetensors) named by the manifest");
       sub.add_option("--batches", a->batches,
                      "calibration batches (.safetensors), each with every quantizable layer's "
                      "input under the layer's name; batch_num of them")
           ->expected(1, -1);
       sub.add_option("--record", a->record, "write the toolkit's record file here");
       sub.add_option("--quant-config", a->quant_config, "write the detailed JSON config here");
       sub.add_option("--fake-quant-weights", a->fake_quant_weights,
                      "write the fake-quantized weights (.safetensors) here");
       sub.add_option("--export", a->exports,
                      "also export the record: FORMAT=OUT (repeatable; trt-cache:VERSION=OUT; "
                      "docs/export.md)")
           ->check([](const std::string& v) {
             auto r = ptq_cli::parse_export_spec(v);
             return r ? std::string() : r.error().message;
           });
       sub.add_option("--ada-data", a->ada_data,
                      "AdaRound samples (.safetensors): each ada_quantize layer's input samples "
                      "under the layer's name (dim 0 is the sample axis)");
       sub.add_option("--seed", a->seed, "AdaRound minibatch seed (default 0)")
           ->check(CLI::NonNegativeNumber);  // CLI11 would wrap "-3" to 2^64 - 3
       sub.add_option("--threads", a->threads,
                      "threads for the kernels (default: all cores; "
                      "results are identical for every count)");
       sub.add_flag("--json", a->json, "print the per-layer table as JSON");
       sub.add_flag("--quiet", a->quiet, "no progress output");
       return [a]() -> int {
         ptq::session_options opt;
         opt.threads =
             a->threads != 0 ? a->threads : std::max(1U, std::thread::hardware_concurrency());
         ptq_cli::progress_printer p;
         p.quiet = a->quiet;
         opt.on_ada_progress = p;
         opt.kernels = ptq_cli::numeric_kernels();  // the best arch of this CPU
         opt.ada_seed = a->seed;
         opt.ada_report_every = p.tty ? 50 : 1000;
         ptq_cli::install_interrupt_cleanup();
         if (a->model.empty() && a->weights.empty() && a->batches.empty()) {
           if (!a->ada_data.empty()) {
             return fail_usage(
                 "--ada-data goes with --model/--weights/--batches; the bundled example takes "
                 "its AdaRound samples from its calibration images");
           }
           return run_bundled(*a, std::move(opt), p);
         }
         if (a->config.empty())
           return fail_usage("give the CONFIG file with --model");
         if (a->model.empty() || a->weights.empty() || a->batches.empty()) {
           return fail_usage(
               "CONFIG with model files needs all of --model, --weights and --batches (or no "
               "model files at all for the bundled example)");
         }
         return run_files(*a, std::move(opt), p);
       };
     }}};

}  // namespace
