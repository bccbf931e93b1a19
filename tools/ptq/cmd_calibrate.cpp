// `ptq calibrate`: calibrate a whole model and write the toolkit's record, the detailed JSON
// config and the fake-quantized weights. With no arguments it calibrates the bundled digits
// model (examples/digits) with the bundled quant.cfg and reports FP32 and quantized accuracy.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "command.hpp"
#include "config_io.hpp"
#include "digits_pipeline.hpp"
#include "numeric_io.hpp"
#include "ptq/config_json.hpp"
#include "ptq/io/atomic_file.hpp"
#include "ptq/io/safetensors.hpp"
#include "ptq/session/manifest.hpp"
#include "ptq/session/session.hpp"

namespace fs = std::filesystem;

namespace {

struct calibrate_args {
  std::string config;
  std::string model;
  std::string weights;
  std::vector<std::string> batches;
  std::string record;
  std::string quant_config;
  std::string fake_quant_weights;
  std::string ada_data;
  std::uint64_t seed = 0;
  unsigned threads = 0;
  bool json = false;
  bool quiet = false;
};

int error(const std::string& message) {
  std::cerr << "ptq calibrate: error: " << message << '\n';
  return ptq_cli::exit_error;
}

// Progress on stderr: a bar when it is a terminal, plain lines otherwise, nothing when quiet.
struct progress_printer {
  bool quiet = false;
  bool tty = ::isatty(2) != 0;
  void operator()(const ptq::progress_event& e) const {
    if (quiet || e.total == 0)
      return;
    static const char* const names[] = {"fusion", "dmq", "weights", "activations", "done"};
    const char* phase = names[static_cast<int>(e.phase)];
    if (tty) {
      const std::size_t width = 24;
      const std::size_t filled = width * e.done / e.total;
      std::cerr << "\r" << std::left << std::setw(12) << phase << " [" << std::string(filled, '#')
                << std::string(width - filled, ' ') << "] " << e.done << "/" << e.total << " "
                << std::setw(20) << e.layer << std::flush;
      if (e.done == e.total)
        std::cerr << '\n';
    } else {
      std::cerr << "ptq calibrate: " << phase << " " << e.done << "/" << e.total << " " << e.layer
                << '\n';
    }
  }
  // AdaRound: the iteration and the losses of the current layer.
  void operator()(std::string_view layer, const ptq::ada_progress& e) const {
    if (quiet || e.total == 0)
      return;
    std::ostringstream line;
    line << "ada " << layer << " " << e.iteration << "/" << e.total << " recon "
         << std::setprecision(4) << e.recon_loss << " round " << e.round_loss;
    if (tty) {
      std::cerr << "\r" << std::left << std::setw(70) << line.str() << std::flush;
      if (e.iteration == e.total)
        std::cerr << '\n';
    } else {
      std::cerr << "ptq calibrate: " << line.str() << '\n';
    }
  }
};

std::string db(double v) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << v << " dB";
  return s.str();
}

std::string shortest(float v) {
  return ptq::detail::python_repr(ptq::detail::toolkit_double(v));
}

struct row {
  std::string layer, type, algos, bits, scale_d, offset_d, wscale;
  double wsqnr = std::nan(""), asqnr = std::nan("");
  bool enabled = true;
};

std::vector<row> table_rows(const ptq::calibration_session& s, const std::vector<double>& asqnr) {
  std::vector<row> rows;
  for (std::size_t i = 0; i < s.layers().size(); ++i) {
    const auto& l = s.layers()[i];
    row r;
    r.layer = l.desc.name;
    r.type = std::string(ptq::to_string(l.desc.type));
    r.enabled = l.plan.quant_enable;
    if (!r.enabled) {
      r.algos = "skipped";
      rows.push_back(r);
      continue;
    }
    const bool pool = l.desc.type == ptq::layer_type::avg_pool2d;
    const auto walgo = l.plan.weight ? l.plan.weight->algo : ptq::weight_algo::arq;
    r.algos = std::string(pool ? "-" : (walgo == ptq::weight_algo::arq ? "arq" : "ada")) + "/" +
              std::string(ptq::to_string(l.plan.activation.algo)) +
              (l.balance_factors.empty() ? "" : "+dmq");
    r.bits = "w" + std::to_string(l.weight_params->bits) + "a" +
             std::to_string(l.activation_params->bits);
    r.scale_d = shortest(l.activation_params->scale);
    r.offset_d = std::to_string(l.activation_params->offset);
    const auto& sw = l.weight_params->scale;
    const auto [lo, hi] = std::minmax_element(sw.begin(), sw.end());
    r.wscale = sw.size() == 1 ? shortest(*lo) : shortest(*lo) + ".." + shortest(*hi);
    r.wsqnr = pool ? std::nan("") : l.weight_sqnr_db;
    r.asqnr = i < asqnr.size() ? asqnr[i] : std::nan("");
    rows.push_back(r);
  }
  return rows;
}

void print_table(const std::vector<row>& rows) {
  std::cout << std::left << std::setw(12) << "layer" << std::setw(11) << "type" << std::setw(14)
            << "algorithms" << std::setw(7) << "bits" << std::setw(14) << "scale_d" << std::setw(9)
            << "offset_d" << std::setw(28) << "weight scale" << std::setw(10) << "w SQNR"
            << "a SQNR\n";
  for (const auto& r : rows) {
    std::cout << std::left << std::setw(12) << r.layer << std::setw(11) << r.type << std::setw(14)
              << r.algos << std::setw(7) << r.bits << std::setw(14) << r.scale_d << std::setw(9)
              << r.offset_d << std::setw(28) << r.wscale << std::setw(10)
              << (std::isnan(r.wsqnr) ? "-" : db(r.wsqnr))
              << (std::isnan(r.asqnr) ? "-" : db(r.asqnr)) << '\n';
  }
}

nlohmann::ordered_json json_rows(const std::vector<row>& rows) {
  auto num = [](double v) {
    return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
  };
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& r : rows) {
    nlohmann::ordered_json j;
    j["layer"] = r.layer;
    j["type"] = r.type;
    j["quant_enable"] = r.enabled;
    if (r.enabled) {
      j["algorithms"] = r.algos;
      j["bits"] = r.bits;
      j["scale_d"] = std::stod(r.scale_d);
      j["offset_d"] = std::stoi(r.offset_d);
      j["weight_scale"] = r.wscale;
      j["weight_sqnr_db"] = num(r.wsqnr);
      j["activation_sqnr_db"] = num(r.asqnr);
    }
    out.push_back(j);
  }
  return out;
}

// The fake-quantized weights under the weights file's names: each quantized layer's weight
// replaced (divided back by its DMQ factors, so the float model runs unchanged), a fused conv's
// weight and bias replaced by the fused ones and its BatchNorm tensors left out.
ptq::result<> write_fake_quant_weights(const std::string& path,
                                       const ptq::io::safetensors_file& weights,
                                       const ptq::model_manifest& model,
                                       const ptq::calibration_session& s) {
  std::vector<std::string> drop;
  std::vector<ptq::io::named_tensor> replaced;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const auto& m = model.layers[i];
    const auto& l = s.layers()[i];
    if (m.weight_name.empty() || !(l.plan.quant_enable || l.fused))
      continue;
    ptq::io::named_tensor w{m.weight_name,
                            {l.desc.weight.shape().begin(), l.desc.weight.shape().end()},
                            {l.desc.weight.begin(), l.desc.weight.end()}};
    if (!l.balance_factors.empty()) {
      std::vector<float> inv(l.balance_factors.size());
      for (std::size_t c = 0; c < inv.size(); ++c)
        inv[c] = 1.0f / l.balance_factors[c];
      (void)ptq::dmq_apply_to_weight(w.data.data(), w.shape, l.desc.type, l.desc.conv.groups, inv);
    }
    replaced.push_back(std::move(w));
    if (l.fused) {
      const std::string bias_name = m.bias_name.empty() ? m.desc.name + ".bias" : m.bias_name;
      replaced.push_back(
          {bias_name, {l.desc.bias->size()}, {l.desc.bias->begin(), l.desc.bias->end()}});
      drop.insert(drop.end(), m.batch_norm_names.begin(), m.batch_norm_names.end());
    }
  }
  std::vector<ptq::io::named_tensor> out;
  for (const auto& e : weights.entries) {
    if (std::find(drop.begin(), drop.end(), e.name) != drop.end())
      continue;
    auto it = std::find_if(replaced.begin(), replaced.end(),
                           [&](const auto& t) { return t.name == e.name; });
    if (it != replaced.end()) {
      out.push_back(*it);
      replaced.erase(it);
      continue;
    }
    auto t = weights.get(e.name);
    if (!t)
      continue;  // non-float tensors (e.g. num_batches_tracked) are left out
    out.push_back({e.name, t->shape, std::move(t->data)});
  }
  for (auto& t : replaced)
    out.push_back(std::move(t));  // a fused bias the conv did not have
  return ptq::io::write_safetensors(path, out);
}

// Locates the bundled example (next to the source tree the binary was built from, or below
// the current directory).
fs::path find_digits() {
  std::vector<fs::path> candidates;
  std::error_code ec;
  const auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (auto dir = exe.parent_path(); !dir.empty() && dir != dir.root_path();
         dir = dir.parent_path()) {
      candidates.push_back(dir / "examples");
    }
  }
  candidates.push_back(fs::current_path(ec) / "examples");
#ifdef PTQ_SOURCE_DIR
  candidates.push_back(fs::path(PTQ_SOURCE_DIR) / "examples");
#endif
  for (const auto& c : candidates) {
    if (fs::exists(c / "digits" / "manifest.json", ec) &&
        fs::exists(c / "configs" / "quant.cfg", ec)) {
      return c;
    }
  }
  return {};
}

ptq::result<> write_outputs(const calibrate_args& a, const ptq::calibration_session& s,
                            const ptq::record_file& rec, const ptq::io::safetensors_file& weights,
                            const ptq::model_manifest& model) {
  if (!a.record.empty()) {
    if (auto r = ptq::io::write_file_atomic(a.record, ptq::write_record(rec)); !r)
      return r;
  }
  if (!a.quant_config.empty()) {
    if (auto r = ptq::io::write_file_atomic(a.quant_config, ptq::to_toolkit_json(s.plan())); !r)
      return r;
  }
  if (!a.fake_quant_weights.empty())
    return write_fake_quant_weights(a.fake_quant_weights, weights, model, s);
  return {};
}

int report(const calibrate_args& a, const ptq::calibration_session& s,
           const std::vector<double>& asqnr, const double* fp32, const double* quant,
           double seconds) {
  const auto rows = table_rows(s, asqnr);
  if (a.json) {
    nlohmann::ordered_json j;
    j["layers"] = json_rows(rows);
    if (fp32)
      j["fp32_accuracy"] = *fp32;
    if (quant)
      j["quantized_accuracy"] = *quant;
    j["ada_seed"] = a.seed;
    j["outputs"] = {{"record", a.record},
                    {"quant_config", a.quant_config},
                    {"fake_quant_weights", a.fake_quant_weights}};
    std::cout << j.dump(2) << '\n';
    return ptq_cli::exit_ok;
  }
  print_table(rows);
  if (fp32 && quant) {
    std::cout << "\naccuracy on the test split: FP32 " << std::fixed << std::setprecision(2)
              << *fp32 * 100.0 << " %, quantized " << *quant * 100.0 << " % (" << std::showpos
              << (*quant - *fp32) * 100.0 << std::noshowpos << " points)\n";
  }
  std::cout << std::defaultfloat;
  const bool any_ada = std::any_of(s.layers().begin(), s.layers().end(), [](const auto& l) {
    return l.plan.quant_enable && l.plan.weight && l.plan.weight->algo == ptq::weight_algo::ada &&
           ptq::supports_ada_round(l.desc.type);
  });
  if (any_ada)
    std::cout << "AdaRound seed:      " << a.seed << '\n';
  if (!a.record.empty())
    std::cout << "record:             " << a.record << '\n';
  if (!a.quant_config.empty())
    std::cout << "quant config:       " << a.quant_config << '\n';
  if (!a.fake_quant_weights.empty())
    std::cout << "fake-quant weights: " << a.fake_quant_weights << '\n';
  std::cout << "calibrated in " << std::setprecision(3) << seconds << " s\n";
  return ptq_cli::exit_ok;
}

int run_bundled(calibrate_args a, ptq::session_options opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path examples = find_digits();
  if (examples.empty())
    return error("cannot find the bundled example (examples/digits)");
  if (a.config.empty())
    a.config = (examples / "configs" / "quant.cfg").string();
  if (a.record.empty() && a.quant_config.empty() && a.fake_quant_weights.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "ptq-calibrate-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr)
      return error("cannot create a temporary folder");
    a.record = tmpl + "/record.txt";
    a.quant_config = tmpl + "/quant_config.json";
    a.fake_quant_weights = tmpl + "/fake_quant_weights.safetensors";
    if (!a.json)
      std::cout << "outputs go to " << tmpl << "\n";
  }
  const auto cfg = ptq_cli::load_config(a.config, "calibrate");
  if (!cfg)
    return ptq_cli::exit_error;
  digits::digits_data d;
  std::string err;
  if (!digits::load_digits((examples / "digits").string(), d, err))
    return error(err);
  if (!a.json) {
    std::cout << "calibrating the bundled digits CNN (" << d.model.layers.size()
              << " quantizable layers) with " << a.config << "\n\n";
  }
  auto r = digits::calibrate_and_evaluate(cfg->parsed.value(), d.model, d.calib, d.test,
                                          d.test_labels, 32, std::move(opt));
  std::cerr << ptq::format_diagnostics(r.diagnostics, cfg->text, a.config);
  if (!r.error.empty())
    return error(r.error);
  if (auto w = write_outputs(a, *r.session, r.record, d.weights, d.model); !w)
    return error(w.error().message);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report(a, *r.session, r.activation_sqnr_db, &r.fp32_accuracy, &r.quant_accuracy, secs);
}

int run_files(const calibrate_args& a, ptq::session_options opt) {
  const auto t0 = std::chrono::steady_clock::now();
  if (a.model.empty() || a.weights.empty() || a.batches.empty()) {
    std::cerr << "ptq calibrate: error: CONFIG needs --model, --weights and --batches (or give "
                 "no arguments at all for the bundled example)\n";
    return ptq_cli::exit_usage;
  }
  const auto cfg = ptq_cli::load_config(a.config, "calibrate");
  if (!cfg)
    return ptq_cli::exit_error;
  std::string err;
  auto read_weights = ptq::io::read_safetensors(a.weights);
  if (!read_weights)
    return error(read_weights.error().message);
  const ptq::io::safetensors_file weights = std::move(read_weights).value();
  const auto manifest_text = ptq::read_text_file(a.model);
  if (!manifest_text)
    return error(manifest_text.error().message);
  auto parsed_model = ptq::parse_manifest(manifest_text.value(), weights);
  if (!parsed_model)
    return error(a.model + ": " + parsed_model.error().message);
  const ptq::model_manifest model = std::move(parsed_model).value();
  std::vector<ptq::layer_desc> descs;
  for (const auto& m : model.layers)
    descs.push_back(m.desc);
  auto created = ptq::calibration_session::create(cfg->parsed.value(), descs, std::move(opt));
  std::cerr << ptq::format_diagnostics(created.diagnostics(), cfg->text, a.config);
  if (!created)
    return ptq_cli::exit_error;
  auto s = std::move(created).value();
  const std::size_t need = s.plan().batch_num;
  if (a.batches.size() < need) {
    return error("the config's batch_num is " + std::to_string(need) + " but only " +
                 std::to_string(a.batches.size()) + " batch file(s) were given");
  }
  std::vector<ptq::io::safetensors_file> batches(need);
  for (std::size_t b = 0; b < need; ++b) {
    auto read = ptq::io::read_safetensors(a.batches[b]);
    if (!read)
      return error(read.error().message);
    batches[b] = std::move(read).value();
  }
  auto input = [&](std::size_t b, const std::string& layer, ptq::io::float_tensor& t) {
    auto got = batches[b].get(layer);
    if (!got) {
      err = a.batches[b] + ": " + got.error().message +
            " (each batch file holds every quantizable layer's input)";
      return false;
    }
    t = std::move(got).value();
    return true;
  };
  ptq::io::float_tensor t;
  for (const auto& name : s.dmq_layers()) {  // the DMQ factors come from the first batch
    if (!input(0, name, t))
      return error(err);
    if (auto st = s.feed_dmq(name, ptq::tensor_ref{t.data.data(), t.shape, name + " input"}); !st) {
      return error(st.error().message);
    }
  }
  if (auto st = s.quantize_weights(); !st)
    return error(st.error().message);
  if (const auto ada = s.ada_layers(); !ada.empty()) {
    // Each AdaRound layer learns against its own float output on its samples (no network runs).
    if (a.ada_data.empty()) {
      return error("layer '" + ada.front() +
                   "' uses ada_quantize: give its input samples with --ada-data FILE");
    }
    auto read_samples = ptq::io::read_safetensors(a.ada_data);
    if (!read_samples)
      return error(read_samples.error().message);
    const ptq::io::safetensors_file samples = std::move(read_samples).value();
    for (const auto& name : ada) {
      auto got = samples.get(name);
      if (!got) {
        return error(a.ada_data + ": " + got.error().message +
                     " (--ada-data holds each AdaRound layer's input samples under its name)");
      }
      t = std::move(got).value();
      if (auto st = s.quantize_ada(name, ptq::tensor_ref{t.data.data(), t.shape,
                                                         name + " samples (" + a.ada_data + ")"});
          !st) {
        return error(st.error().message);
      }
    }
  }
  std::vector<ptq::io::float_tensor> kept(s.layers().size());  // last batch, for the SQNR
  for (std::size_t b = 0; b < need; ++b) {
    for (std::size_t i = 0; i < s.layers().size(); ++i) {
      const auto& l = s.layers()[i];
      if (!l.plan.quant_enable)
        continue;
      if (!input(b, l.desc.name, t))
        return error(err);
      if (auto st =
              s.feed(l.desc.name, ptq::tensor_ref{t.data.data(), t.shape,
                                                  l.desc.name + " input (" + a.batches[b] + ")"});
          !st) {
        return error(st.error().message);
      }
      if (b + 1 == need)
        kept[i] = t;
    }
  }
  auto rec = s.record();
  if (!rec)
    return error(rec.error().message);
  std::vector<double> asqnr(s.layers().size(), std::nan(""));
  for (std::size_t i = 0; i < s.layers().size(); ++i) {
    const auto& l = s.layers()[i];
    if (!l.activation_params)
      continue;
    digits::tensor x = digits::tensor::from_shape(kept[i].shape);
    std::copy(kept[i].data.begin(), kept[i].data.end(), x.begin());
    digits::divide_by_factors(x, l.balance_factors, l.desc.type);
    const digits::tensor before = x;
    digits::fake_quantize(x, l.activation_params->scale, l.activation_params->offset,
                          l.activation_params->bits);
    asqnr[i] = ptq::sqnr_db(before.data(), x.data(), x.size());
  }
  if (auto w = write_outputs(a, s, rec.value(), weights, model); !w)
    return error(w.error().message);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report(a, s, asqnr, nullptr, nullptr, secs);
}

const ptq_cli::register_command reg{
    {"calibrate",
     "Calibrate a model: record, detailed JSON config, fake-quantized weights (no arguments: "
     "the bundled digits model)",
     5, [](CLI::App& sub) -> ptq_cli::run_fn {
       auto a = std::make_shared<calibrate_args>();
       sub.add_option("CONFIG", a->config, "simple config (.cfg); default: the bundled quant.cfg");
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
         progress_printer p;
         p.quiet = a->quiet;
         opt.on_progress = p;
         opt.on_ada_progress = p;
         opt.kernels = ptq_cli::numeric_kernels();  // the best arch of this CPU
         opt.ada_seed = a->seed;
         opt.ada_report_every = p.tty ? 50 : 1000;
         if (a->model.empty() && a->weights.empty() && a->batches.empty()) {
           if (!a->ada_data.empty()) {
             std::cerr << "ptq calibrate: error: --ada-data goes with --model/--weights/--batches; "
                          "the bundled example takes its AdaRound samples from its calibration "
                          "images\n";
             return ptq_cli::exit_usage;
           }
           return run_bundled(*a, std::move(opt));
         }
         if (a->config.empty()) {
           std::cerr << "ptq calibrate: error: give the CONFIG file with --model\n";
           return ptq_cli::exit_usage;
         }
         return run_files(*a, std::move(opt));
       };
     }}};

}  // namespace
