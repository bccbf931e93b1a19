// `ptq demo [DIR]`: the README's main job until calibration lands. Checks every bundled sample
// config (examples/configs/*.cfg), resolves it against the bundled layer list and prints the
// per-layer table.
#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bundled_data.hpp"
#include "command.hpp"
#include "config_io.hpp"
#include "ptq/config_json.hpp"

namespace fs = std::filesystem;

namespace {

std::string fmt_float(float v) {
  return ptq::detail::python_repr(ptq::detail::toolkit_double(v));
}

void print_table(const ptq::resolved_config& rc) {
  std::cout << "  " << std::left << std::setw(10) << "layer" << std::setw(11) << "type"
            << std::setw(7) << "quant" << std::setw(26) << "weights" << std::setw(36)
            << "activations"
            << "dmq\n";
  for (const auto& l : rc.layers) {
    std::ostringstream w;
    if (l.weight) {
      w << (l.weight->algo == ptq::weight_algo::arq ? "arq" : "ada") << " int" << l.weight->num_bits
        << (l.weight->channel_wise ? " per-channel" : " per-tensor");
    } else {
      w << "arq int8 (ada n/a)";
    }
    std::ostringstream a;
    const auto& ap = l.activation;
    a << ptq::to_string(ap.algo) << " int" << ap.num_bits << (ap.asymmetric ? " asym" : " sym");
    if (ap.algo == ptq::activation_algo::ifmr) {
      a << " [" << fmt_float(ap.search_range_start) << "," << fmt_float(ap.search_range_end) << "]/"
        << fmt_float(ap.search_step);
    } else {
      a << " " << ap.num_of_bins << " bins";
    }
    std::cout << "  " << std::left << std::setw(10) << l.name << std::setw(11)
              << (l.type ? std::string(ptq::to_string(*l.type)) : "?") << std::setw(7)
              << (l.quant_enable ? "yes" : "skip") << std::setw(26) << w.str() << std::setw(36)
              << a.str() << (l.dmq_balancer_param ? fmt_float(*l.dmq_balancer_param) : "-") << '\n';
  }
}

int run_demo(const std::string& dir_arg) {
  fs::path dir = dir_arg;
  if (dir_arg.empty()) {
    const fs::path data = ptq_cli::find_bundled_data();
    if (data.empty()) {
      std::cerr << "ptq demo: error: cannot find the bundled configs; pass the folder as an "
                   "argument ["
                << "E" << static_cast<unsigned>(ptq::errc::bundled_data_not_found)
                << "]\nnote: " << ptq_cli::bundled_search_text << '\n';
      return ptq_cli::exit_error;
    }
    dir = data / "configs";
  }
  if (!fs::is_directory(dir)) {
    std::cerr << "ptq demo: error: '" << dir.string() << "' is not a folder\n";
    return ptq_cli::exit_error;
  }
  std::vector<fs::path> configs;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".cfg")
      configs.push_back(e.path());
  }
  std::sort(configs.begin(), configs.end());
  std::cout << "ptq " << PTQ_VERSION_STRING << ": checking and resolving " << configs.size()
            << " sample configs in " << dir.string() << "\n";
  int failures = 0;
  for (const auto& cfg : configs) {
    std::cout << "\n== " << cfg.filename().string() << '\n';
    std::cout.flush();
    const auto c = ptq_cli::load_config(cfg.string(), "demo");
    if (!c) {
      ++failures;
      continue;
    }
    auto layers_path = cfg;
    layers_path.replace_extension(".layers.json");
    if (!fs::exists(layers_path))
      layers_path = dir / "layers.json";
    auto read = ptq_cli::read_text_input(layers_path.string(), "layer list");
    if (!read) {
      std::cerr << "ptq demo: " << ptq::format_error(read.error());
      ++failures;
      continue;
    }
    const std::string layers_text = std::move(read).value();
    const auto layers = ptq::try_read_layer_list(layers_text);
    if (!layers) {
      std::cerr << ptq::format_diagnostics(layers.diagnostics(), layers_text, layers_path.string());
      ++failures;
      continue;
    }
    const auto r = ptq::resolve_config(c->parsed.value(), layers.value());
    std::cerr << ptq::format_diagnostics(r.diagnostics(), c->text, cfg.string());
    std::cerr.flush();
    if (!r) {
      ++failures;
      continue;
    }
    std::cout << "  batch_num " << r.value().batch_num << ", layers from "
              << layers_path.filename().string() << '\n';
    print_table(r.value());
  }
  std::cout << '\n'
            << (configs.size() - static_cast<std::size_t>(failures)) << " of " << configs.size()
            << " configs resolved\n";
  return failures == 0 ? ptq_cli::exit_ok : ptq_cli::exit_error;
}

}  // namespace

ptq_cli::command_def ptq_cli::demo_command() {
  return {"demo", "Check and resolve the bundled sample configs; print the per-layer table",
          [](CLI::App& sub) -> ptq_cli::run_fn {
            auto dir = std::make_shared<std::string>();
            sub.add_option("DIR", *dir, "folder of .cfg files and layers.json (default: bundled)");
            sub.footer(ptq_cli::bundled_search_text);
            return [dir]() -> int { return run_demo(*dir); };
          }};
}
