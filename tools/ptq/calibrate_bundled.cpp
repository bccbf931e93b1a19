// `ptq calibrate` on the bundled digits model (bundled_model.hpp): finds the bundled data, runs
// the session through the library's reference forward pass, reports FP32 and quantized accuracy and
// writes the outputs, into a temporary folder it names when no output option is given.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bundled_calibration.hpp"
#include "bundled_data.hpp"
#include "calibrate_run.hpp"
#include "config_io.hpp"
#include "input_files.hpp"
#include "manifest_input.hpp"
#include "ptq/report/auto_calibrate.hpp"
#include "ptq/report/report_data.hpp"

namespace fs = std::filesystem;

namespace ptq_cli::calibrate {

namespace {

/// Loads the bundled digits model and its images from `dir` (digits/ of the bundled data).
ptq::result<ptq_cli::bundled_model> load_bundled(const fs::path& dir) {
  ptq_cli::bundled_model m;
  const std::string weights_path = (dir / "model.safetensors").string();
  auto w = ptq_cli::read_tensor_input(weights_path, "bundled weights");
  if (!w)
    return w.error();
  m.weights = std::move(w).value();
  const std::string manifest_path = (dir / "manifest.json").string();
  auto parsed = ptq_cli::read_manifest_input(manifest_path, m.weights, "bundled manifest");
  if (!parsed)
    return parsed.error();
  m.model = std::move(parsed).value();
  const auto images = [&](const char* file, ptq::io::float_tensor& x,
                          std::vector<float>* labels) -> ptq::result<> {
    const std::string path = (dir / file).string();
    auto f = ptq_cli::read_tensor_input(path, "bundled images");
    if (!f)
      return f.error();
    const auto& src = f.value();
    auto t = src.get("images");
    if (!t)
      return in_file(t.error(), path);
    x = std::move(t).value();
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
    ptq_cli::cleanup_folder_on_signal(nullptr);
    if (!path.empty() && !keep)
      ::rmdir(path.c_str());
  }
};

/// One calibration of the bundled model: its session and what it measured.
struct bundled_run {
  std::optional<ptq::calibration_session> session;
  ptq_cli::bundled_result result;
};

/// `config` with `skip` added to its skip_layers.
ptq::amct_config skipping(ptq::amct_config config, const std::vector<std::string>& skip) {
  for (const auto& name : skip)
    config.skip_layers.push_back({name, {}});
  return config;
}

/// The bundled model calibrated with `config`.
ptq::result<bundled_run> calibrate_once(const ptq::amct_config& config,
                                        const std::vector<ptq::layer_desc>& descs,
                                        const ptq_cli::bundled_model& m,
                                        const ptq::session_options& opt) {
  auto created = ptq::calibration_session::create(config, descs, opt);
  if (!created)
    return ptq::failure_of(created);
  bundled_run run;
  run.session.emplace(std::move(created).value());
  auto r = ptq_cli::calibrate_bundled(*run.session, m, 32, opt.threads, opt.kernels);
  if (!r)
    return r.error();
  run.result = std::move(r).value();
  return run;
}

/// --auto-accuracy: the toolkit's binary search over the most sensitive layers (ranked by the
/// first calibration's weight and test-input SQNR, the report's estimate), each candidate
/// calibrated and evaluated on the test split. Prints every evaluation; returns the accepted
/// run (or the all-float one) and its skip_layers.
ptq::result<std::pair<bundled_run, std::vector<std::string>>> search_accuracy(
    const calibrate_args& a, const ptq::amct_config& config,
    const std::vector<ptq::layer_desc>& descs, const ptq_cli::bundled_model& m,
    const ptq::session_options& opt) {
  std::map<std::vector<std::string>, bundled_run> runs;
  auto first = calibrate_once(config, descs, m, opt);
  if (!first)
    return first.error();
  const auto& s = *first.value().session;
  std::vector<ptq::sensitivity_entry> scores;
  for (std::size_t i = 0; i < s.layers().size(); ++i) {
    const auto& l = s.layers()[i];
    if (l.plan.quant_enable) {
      scores.push_back(
          {l.desc.name,
           ptq::combined_sqnr_db(l.weight_sqnr_db, first.value().result.activation_sqnr_db[i])});
    }
  }
  runs.emplace(std::vector<std::string>{}, std::move(first).value());
  const auto evaluate =
      [&](const std::vector<std::string>& skip) -> ptq::result<ptq::auto_calibration_verdict> {
    auto it = runs.find(skip);
    if (it == runs.end()) {
      auto run = calibrate_once(skipping(config, skip), descs, m, opt);
      if (!run)
        return run.error();
      it = runs.emplace(skip, std::move(run).value()).first;
    }
    const auto& r = it->second.result;
    const double drop = 100.0 * (r.fp32_accuracy - r.quant_accuracy);
    const bool ok = drop <= a.auto_accuracy;
    if (!a.json) {
      char line[160];
      std::snprintf(line, sizeof line, "%6.2f %% (a drop of %.2f points): %s",
                    100.0 * r.quant_accuracy, drop, ok ? "accepted" : "refused");
      std::cout << "auto-accuracy: "
                << (skip.empty() ? std::string("every layer quantized")
                                 : ptq::skip_layers_line(skip))
                << ": " << line << "\n";
    }
    return ptq::auto_calibration_verdict{ok, r.quant_accuracy};
  };
  auto searched = ptq::auto_calibrate(std::move(scores), evaluate);
  if (!searched)
    return searched.error();
  const auto& skip = searched.value().skip_layers;
  auto it = runs.find(skip);
  if (it == runs.end()) {  // every layer in float: calibrated once more, not evaluated
    auto run = calibrate_once(skipping(config, skip), descs, m, opt);
    if (!run)
      return run.error();
    it = runs.emplace(skip, std::move(run).value()).first;
  }
  if (!a.json) {
    std::cout << "auto-accuracy: " << searched.value().steps.size() << " evaluations; "
              << (skip.empty() ? std::string("every layer stays quantized")
                               : ptq::skip_layers_line(skip) +
                                     (searched.value().accepted ? "" : " (no set was accepted)"))
              << "\n\n";
  }
  return std::pair<bundled_run, std::vector<std::string>>(std::move(it->second), skip);
}

}  // namespace

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
  if (!a.onnx.empty())
    inputs.push_back({"--onnx", a.onnx});
  const auto cfg = ptq_cli::load_config(a.config, "calibrate");
  if (!cfg)
    return ptq_cli::exit_error;
  opt.on_progress = progress;
  output_folder folder;
  if (outputs_of(a).empty()) {  // no output option: the three outputs go to a new folder
    std::string tmpl = (fs::temp_directory_path() / "ptq-calibrate-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return fail(ptq::make_error(ptq::errc::output_not_writable,
                                  "cannot create a temporary folder '" + tmpl + "'"));
    }
    folder.path = tmpl;
    ptq_cli::cleanup_folder_on_signal(folder.path);
    a.record = tmpl + "/record.txt";
    a.quant_config = tmpl + "/quant_config.json";
    a.fake_quant_weights = tmpl + "/fake_quant_weights.safetensors";
    if (!a.json)
      std::cout << "outputs go to " << tmpl << "\n" << std::flush;
  }
  if (auto st = ptq_cli::check_outputs(outputs_of(a), inputs); !st)
    return fail(st.error());
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
  bundled_run run;
  if (a.auto_accuracy >= 0.0) {
    auto searched = search_accuracy(a, cfg->parsed.value(), descs, model.value(), opt);
    if (!searched)
      return fail(searched.error());
    run = std::move(searched.value().first);
  } else {
    auto created = ptq::calibration_session::create(cfg->parsed.value(), descs, std::move(opt));
    print_session_diagnostics(created.diagnostics(), cfg->text, a.config,
                              (digits / "model.safetensors").string(), &model.value().model);
    if (!created)
      return ptq_cli::exit_error;
    run.session.emplace(std::move(created).value());
    auto r = ptq_cli::calibrate_bundled(*run.session, model.value(), 32, threads, kernels);
    if (!r)
      return fail(r.error());
    run.result = std::move(r).value();
  }
  auto& s = *run.session;
  const auto& res = run.result;
  auto rc =
      ptq_cli::bundled_report_context(a, s, model.value(), res, cfg->text, 32, threads, kernels);
  if (!rc)
    return fail(rc.error());
  auto files = render_outputs(a, s, res.record, model.value().weights, model.value().model,
                              (digits / "manifest.json").string(), rc.value());
  if (!files)
    return fail(files.error());
  if (auto st = ptq_cli::commit_outputs(files.value()); !st)
    return fail(st.error());
  folder.keep = true;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const ptq_cli::test_accuracy acc{res.fp32_accuracy, res.quant_accuracy, &res.fp32_predictions,
                                   &res.quant_predictions};
  return ptq_cli::report(a, s, res.activation_sqnr_db, &acc, secs);
}

}  // namespace ptq_cli::calibrate
