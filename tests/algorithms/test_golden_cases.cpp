// Every golden numeric case of the reference toolkit (tests/data/numeric-cases, tolerances and
// the `alt` rule of its README) through the library API: the .npy inputs read with
// ptq::io::read_npy, the case's `ptq observe|weights|balance` arguments turned into the settings
// of the observers, arq_calibrate or dmq_factors, as the tool does. So the suites built without
// the tool (the sanitizer stage) run them too; tests/tools runs the same cases through the tool.
// Each case runs on every kernel set this machine has, and the sets must agree bit for bit.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "../kernels/arch_kernels.hpp"
#include "ptq/algorithms.hpp"
#include "ptq/algorithms/scale_out/two_pass_observer.hpp"
#include "ptq/io/npy.hpp"
#include "sharded_two_pass.hpp"

namespace {

namespace fs = std::filesystem;

const fs::path cases_dir = fs::path(PTQ_TEST_DATA_DIR) / "numeric-cases";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool rel_close(double got, double want, double rel) {
  return std::fabs(got - want) <= rel * std::max(std::fabs(got), std::fabs(want));
}

/// The case's command-line arguments after the subcommand: `--name value` pairs and the flags
/// in `flags`. An argument this reader does not know fails the test, so a new case that needs
/// a setting this file does not pass on cannot pass by ignoring it.
struct case_args {
  std::string command;
  std::map<std::string, std::string> values;
  std::vector<std::string> flags;

  [[nodiscard]] bool has(const std::string& flag) const {
    return std::find(flags.begin(), flags.end(), flag) != flags.end();
  }
  [[nodiscard]] std::string text(const std::string& name, const std::string& fallback) const {
    const auto it = values.find(name);
    return it == values.end() ? fallback : it->second;
  }
  [[nodiscard]] double number(const std::string& name, double fallback) const {
    const auto it = values.find(name);
    return it == values.end() ? fallback : std::stod(it->second);
  }
};

case_args parse_args(const std::vector<std::string>& args) {
  static const std::vector<std::string> flags{"--asymmetric", "--symmetric", "--fp16-scale",
                                              "--channel-wise", "--per-tensor"};
  static const std::vector<std::string> options{"--algo",
                                                "--search-range-start",
                                                "--search-range-end",
                                                "--search-step",
                                                "--max-percentile",
                                                "--min-percentile",
                                                "--bits",
                                                "--candidates",
                                                "--num-of-bins",
                                                "--type",
                                                "--groups",
                                                "--alpha"};
  case_args a;
  REQUIRE(!args.empty());
  a.command = args[0];
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& s = args[i];
    INFO("argument " << s);
    if (std::find(flags.begin(), flags.end(), s) != flags.end()) {
      a.flags.push_back(s);
    } else {
      REQUIRE(std::find(options.begin(), options.end(), s) != options.end());
      REQUIRE(i + 1 < args.size());
      a.values[s] = args[++i];
    }
  }
  return a;
}

ptq::io::npy_array load(const fs::path& p) {
  auto r = ptq::io::try_read_npy(p.string());
  INFO(p.string() << ": " << (r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
  return std::move(r).value();
}

ptq::layer_type layer_type_of(const case_args& a) {
  const auto op = ptq::layer_type_from_string(a.text("--type", ""));
  INFO("--type " << a.text("--type", ""));
  REQUIRE(op.has_value());
  return *op;
}

/// What a case computes: an activation's scale and offset, a weight's scales and offsets, or
/// DMQ factors; or the error.
struct case_output {
  std::vector<float> scale;
  std::vector<std::int32_t> offset;
  ptq::error error;
  bool ok = false;
};

bool operator==(const case_output& x, const case_output& y) {
  return x.ok == y.ok && x.scale == y.scale && x.offset == y.offset &&
         x.error.code == y.error.code && x.error.message == y.error.message;
}

/// How `ptq observe` runs a case: today's one pass, `--memory bounded` (two_pass_observer), or
/// the bounded mode sharded (sharded_two_pass.hpp) over `shards` observers.
struct observe_mode {
  bool bounded = false;
  std::size_t shards = 0;  ///< 0: two_pass_observer in one process
  bool reverse = false;
};

/// The bounded mode through two_pass_observer: both passes over the batches in order.
ptq::result<ptq::activation_quant_result> run_two_pass_observer(const ptq::activation_settings& s,
                                                                const ptq_test::batches_t& batches,
                                                                std::uint64_t total,
                                                                const ptq::kernels::kernel_set& k) {
  return ptq::with_activation_policy(s.algo, [&](auto policy) {
    using P = decltype(policy);
    ptq::two_pass_observer<P> obs(ptq::settings_for<P>(s), k);
    if (auto st = obs.begin(total); !st)
      return ptq::result<ptq::activation_quant_result>(st.error());
    for (int pass = 1; pass <= 2; ++pass) {
      for (std::size_t b = 0; b < batches.size(); ++b) {
        if (auto st = obs.observe(b, batches[b].data(), batches[b].size()); !st)
          return ptq::result<ptq::activation_quant_result>(st.error());
      }
      if (pass == 1) {
        if (auto st = obs.next_pass(); !st)
          return ptq::result<ptq::activation_quant_result>(st.error());
      }
    }
    return obs.finalize();
  });
}

/// `ptq observe`: one observer over every batch, in order (IFMR concatenates them, HFMG merges
/// each later batch into the first one's histogram); FORCE_FP16_QUANT rounds the final scale.
case_output run_observe(const case_args& a, const std::vector<fs::path>& inputs,
                        const ptq::kernels::kernel_set& k, const observe_mode& mode = {}) {
  const int bits = static_cast<int>(a.number("--bits", 8));
  REQUIRE(a.has("--asymmetric") != a.has("--symmetric"));
  const bool asymmetric = a.has("--asymmetric");
  ptq::activation_settings s;
  const std::string algo = a.text("--algo", "ifmr");
  REQUIRE((algo == "ifmr" || algo == "hfmg"));
  s.algo = algo == "hfmg" ? ptq::activation_algo::hfmg : ptq::activation_algo::ifmr;
  s.ifmr.search_range_start = a.number("--search-range-start", s.ifmr.search_range_start);
  s.ifmr.search_range_end = a.number("--search-range-end", s.ifmr.search_range_end);
  s.ifmr.search_step = a.number("--search-step", s.ifmr.search_step);
  s.ifmr.max_percentile = a.number("--max-percentile", s.ifmr.max_percentile);
  s.ifmr.min_percentile = a.number("--min-percentile", s.ifmr.min_percentile);
  s.ifmr.bits = bits;
  s.ifmr.asymmetric = asymmetric;
  const std::string candidates = a.text("--candidates", "toolkit");
  REQUIRE((candidates == "toolkit" || candidates == "inclusive"));
  s.ifmr.candidates =
      candidates == "inclusive" ? ptq::candidate_rule::inclusive : ptq::candidate_rule::toolkit;
  s.hfmg.num_of_bins = static_cast<std::size_t>(a.number("--num-of-bins", 4096));
  s.hfmg.bits = bits;
  s.hfmg.asymmetric = asymmetric;
  case_output out;
  ptq::result<ptq::activation_quant_result> r = ptq::activation_quant_result{};
  if (!mode.bounded) {
    ptq::activation_observer obs(s, k);
    for (const auto& p : inputs) {
      const auto batch = load(p);
      auto st = obs.observe(batch.data.data(), batch.data.size());
      if (!st) {
        out.error = st.error();
        return out;
      }
    }
    r = obs.finalize();
  } else {
    ptq_test::batches_t batches;
    std::uint64_t total = 0;
    for (const auto& p : inputs) {
      batches.push_back(load(p).data);
      total += batches.back().size();
    }
    if (mode.shards == 0) {
      r = run_two_pass_observer(s, batches, total, k);
    } else {
      r = ptq_test::run_sharded(s, batches, mode.shards, mode.reverse, k);
    }
  }
  if (!r) {
    out.error = r.error();
    return out;
  }
  const ptq::activation_quant_result q =
      a.has("--fp16-scale") ? ptq::with_fp16_scale(r.value()) : r.value();
  out.scale = {q.scale};
  out.offset = {q.offset};
  out.ok = true;
  return out;
}

/// `ptq weights --algo arq`: the layer type's default granularity unless the case names one.
case_output run_weights(const case_args& a, const std::vector<fs::path>& inputs,
                        const ptq::kernels::kernel_set& k) {
  REQUIRE(a.text("--algo", "arq") == "arq");
  REQUIRE(inputs.size() == 1);
  const ptq::layer_type op = layer_type_of(a);
  const auto w = load(inputs[0]);
  ptq::arq_settings s;
  s.bits = static_cast<int>(a.number("--bits", 8));
  s.channel_wise =
      a.has("--channel-wise") || (!a.has("--per-tensor") && op != ptq::layer_type::linear);
  const auto groups = static_cast<std::size_t>(a.number("--groups", 1));
  auto r = ptq::arq_calibrate(ptq::view_of(w.data.data(), w.shape, "weight"), op, groups, s, k);
  case_output out;
  if (!r) {
    out.error = r.error();
    return out;
  }
  out.scale = r.value().scale;
  out.offset = r.value().offset;
  out.ok = true;
  return out;
}

/// `ptq balance`: DMQ factors from the layer's input batch and weight.
case_output run_balance(const case_args& a, const std::vector<fs::path>& inputs,
                        const ptq::kernels::kernel_set& k) {
  REQUIRE(inputs.size() == 2);
  const ptq::layer_type op = layer_type_of(a);
  const auto act = load(inputs[0]);
  const auto w = load(inputs[1]);
  const auto groups = static_cast<std::size_t>(a.number("--groups", 1));
  const ptq::dmq_settings s{a.number("--alpha", 0.5)};
  auto r = ptq::dmq_factors(ptq::view_of(act.data.data(), act.shape, "act"),
                            ptq::view_of(w.data.data(), w.shape, "weight"), op, groups, s, k);
  case_output out;
  if (!r) {
    out.error = r.error();
    return out;
  }
  out.scale = r.value();
  out.ok = true;
  return out;
}

case_output run_case(const case_args& a, const std::vector<fs::path>& inputs,
                     const ptq::kernels::kernel_set& k) {
  if (a.command == "observe")
    return run_observe(a, inputs, k);
  if (a.command == "weights")
    return run_weights(a, inputs, k);
  INFO("subcommand " << a.command);
  REQUIRE(a.command == "balance");
  return run_balance(a, inputs, k);
}

/// The error each error case must give: its code and a part of its message.
struct expected_error {
  ptq::errc code;
  std::string text;
};
const std::map<std::string, expected_error> error_cases{
    {"042_ifmr_nan-input-error", {ptq::errc::non_finite, "NaN at flat index 123"}},
    {"043_hfmg_inf-input-error", {ptq::errc::non_finite, "-Inf at flat index 0"}},
    {"044_arq_empty-weight-error", {ptq::errc::empty_tensor, "weight"}},
};

/// Compares a case's output with its expected values as tests/tools does with the tool's
/// printed output (which is the shortest text of the same float32, so reads back as these).
bool matches(const nlohmann::json& c, const case_output& got) {
  const auto& exp = c.at("expected");
  const auto& tol = c.at("tolerance");
  const std::string algo = c.at("algo");
  if (algo == "ifmr" || algo == "hfmg") {
    REQUIRE(got.scale.size() == 1);
    std::vector<std::pair<double, long>> accepted{
        {exp.at("scale").get<double>(), exp.at("offset").get<long>()}};
    if (tol.contains("alt")) {
      for (const auto& alt : tol.at("alt"))
        accepted.emplace_back(alt.at(0).get<double>(), alt.at(1).get<long>());
    }
    const double rel = tol.at("scale_rel");
    return std::any_of(accepted.begin(), accepted.end(), [&](const auto& p) {
      return rel_close(got.scale[0], p.first, rel) && got.offset[0] == p.second;
    });
  }
  const bool arq = algo == "arq";
  const auto want = exp.at(arq ? "scale_w" : "tensor_balance_factor").get<std::vector<double>>();
  const double rel = tol.at(arq ? "scale_rel" : "factor_rel");
  if (got.scale.size() != want.size())
    return false;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!rel_close(got.scale[i], want[i], rel))
      return false;
  }
  return !arq || exp.at("offset_w").get<std::vector<std::int32_t>>() == got.offset;
}

}  // namespace

TEST_CASE("golden numeric cases of the reference toolkit through the library", "[golden]") {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(cases_dir)) {
    if (e.is_directory())
      dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  REQUIRE(dirs.size() == 44);
  const auto sets = ptq_layers_test::available_kernels();
  REQUIRE(!sets.empty());
  int passed = 0;
  int bounded_checked = 0;
  for (const auto& d : dirs) {
    const std::string name = d.filename().string();
    INFO(name);
    const auto c = nlohmann::json::parse(slurp(d / "case.json"));
    const auto args = parse_args(c.at("args").get<std::vector<std::string>>());
    std::vector<fs::path> inputs;
    for (const auto& in : c.at("inputs"))
      inputs.push_back(d / in.get<std::string>());
    const case_output got = run_case(args, inputs, sets[0].set);
    INFO("error: " << got.error.message);
    for (std::size_t i = 1; i < sets.size(); ++i) {
      INFO("kernel set " << i);
      CHECK(run_case(args, inputs, sets[i].set) == got);  // bit for bit on every arch
    }
    if (args.command == "observe") {
      // --memory bounded, in one process and sharded: the one-pass result bit for bit (an
      // error case: the same error; sharded in reverse, the same code).
      const observe_mode modes[] = {
          {true, 0, false}, {true, 1, false}, {true, 2, false}, {true, 3, true}};
      for (const auto& m : modes) {
        INFO("bounded, shards " << m.shards << (m.reverse ? ", reverse" : ""));
        const case_output b = run_observe(args, inputs, sets[0].set, m);
        INFO("bounded error: " << b.error.message);
        CHECK(b.ok == got.ok);
        CHECK(b.scale == got.scale);
        CHECK(b.offset == got.offset);
        CHECK(b.error.code == got.error.code);
        if (!m.reverse)
          CHECK(b.error.message == got.error.message);
        bounded_checked += b.ok == got.ok && b.scale == got.scale ? 1 : 0;
      }
    }
    if (c.at("expected").contains("error")) {
      const auto it = error_cases.find(name);
      INFO("an error case needs its code and message in error_cases");
      REQUIRE(it != error_cases.end());
      CHECK_FALSE(got.ok);
      CHECK(got.error.code == it->second.code);
      CHECK(got.error.message.find(it->second.text) != std::string::npos);
      passed += !got.ok && got.error.code == it->second.code ? 1 : 0;
      continue;
    }
    REQUIRE(got.ok);
    const bool ok = matches(c, got);
    CHECK(ok);
    passed += ok ? 1 : 0;
  }
  CHECK(passed == 44);
  CHECK(bounded_checked == 4 * 27);  // the 27 IFMR/HFMG cases in four bounded modes
}
