// The calibration report (ptq/report/): the search statistics against the searches they
// describe, no scale changed by keeping them, the sensitivity ranking and its skip_layers line
// (parsed by the config parser), the errors E1301-E1303, the JSON form and the page size of a
// 100-layer model.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "digits_pipeline.hpp"
#include "ptq/config.hpp"
#include "ptq/report.hpp"

namespace {

std::vector<float> sample_data(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.5f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x)
    v = d(gen);
  x[7] = 9.0f;  // an outlier the search clips
  x[11] = -7.5f;
  return x;
}

template <class V>
std::vector<std::string> names_of(const V& located_names) {
  std::vector<std::string> out;
  for (const auto& n : located_names)
    out.push_back(n.value);
  return out;
}

const digits::digits_data& data() {
  static const digits::digits_data d = [] {
    digits::digits_data out;
    std::string err;
    if (!digits::load_digits(std::string(PTQ_EXAMPLES_DIR) + "/digits", out, err))
      FAIL(err);
    return out;
  }();
  return d;
}

digits::pipeline_result compute(const std::string& config_file, bool keep_stats) {
  const std::string text = ptq::value_or_throw(
      ptq::try_read_text_file(std::string(PTQ_EXAMPLES_DIR) + "/configs/" + config_file));
  const auto c = ptq::try_parse_config(text);
  REQUIRE(c.ok());
  ptq::session_options opt;
  opt.keep_search_stats = keep_stats;
  auto r = digits::calibrate_and_evaluate(c.value(), data().model, data().calib, data().test,
                                          data().test_labels, 32, opt);
  INFO(r.error);
  REQUIRE(r.error.empty());
  return r;
}

// Each (config, keep_stats) pipeline runs once per test process (the sanitizer stage runs this
// suite too).
const digits::pipeline_result& calibrate(const std::string& config_file, bool keep_stats) {
  static std::map<std::pair<std::string, bool>, digits::pipeline_result> cache;
  const auto key = std::make_pair(config_file, keep_stats);
  auto it = cache.find(key);
  if (it == cache.end())
    it = cache.emplace(key, compute(config_file, keep_stats)).first;
  return it->second;
}

}  // namespace

TEST_CASE("IFMR statistics describe the search that chose the scale", "[report]") {
  ptq::ifmr_settings s;
  ptq::ifmr_observer o(s);
  const auto a = sample_data(5000, 1), b = sample_data(3000, 2);
  REQUIRE(o.observe(a.data(), a.size()));
  REQUIRE(o.observe(b.data(), b.size()));
  ptq::any_layer_calibrator c = ptq::layer_calibrator<ptq::arq, ptq::ifmr>({}, s);
  REQUIRE(std::get<0>(c).observe(a.data(), a.size()));
  REQUIRE(std::get<0>(c).observe(b.data(), b.size()));
  ptq::activation_search_stats st;
  const auto r = ptq::finalize_with_stats(c, st);
  REQUIRE(r);
  const auto plain = o.finalize();
  REQUIRE(plain);
  CHECK(r.value().scale == plain.value().scale);  // the same search, the same scale
  CHECK(r.value().offset == plain.value().offset);
  const auto search = o.search();
  REQUIRE(search);
  CHECK(st.algo == ptq::activation_algo::ifmr);
  CHECK(st.count == 8000);
  CHECK(st.data_min == -7.5f);
  CHECK(st.data_max == 9.0f);
  REQUIRE(st.histogram.size() == ptq::display_bins);
  std::int64_t total = 0;
  for (const auto h : st.histogram)
    total += h;
  CHECK(total == 8000);
  CHECK(st.has_percentile);
  CHECK(st.percentile_max == search.value().max0);
  CHECK(st.percentile_min == search.value().min0);
  REQUIRE(st.candidate_loss.size() == ptq::detail::ifmr_ratios(s).value().size());
  CHECK(st.candidate_loss.size() >= 60);  // arange(0.7, 1.3, 0.01)
  CHECK(st.candidate_x.front() == 0.7f);
  CHECK(st.best == search.value().best);
  for (std::size_t j = 0; j < st.candidate_loss.size(); ++j)
    CHECK(st.candidate_loss[j] >= st.candidate_loss[st.best]);
  CHECK(st.clip_max == search.value().candidates[st.best].hi);
  CHECK(st.clip_min == search.value().min0);  // asymmetric: the clip starts at min0
  std::uint64_t below = 0, above = 0;
  for (const auto& v : {a, b}) {
    for (const float x : v) {
      below += x < st.clip_min ? 1 : 0;
      above += x > st.clip_max ? 1 : 0;
    }
  }
  CHECK(st.clipped_below == below);
  CHECK(st.clipped_above == above);
  CHECK(st.clipped_above >= 1);  // the outlier at 9
}

TEST_CASE("HFMG statistics come from its histogram: bins summed, the search path kept",
          "[report]") {
  ptq::hfmg_settings s;
  s.num_of_bins = 1024;
  ptq::any_layer_calibrator c = ptq::layer_calibrator<ptq::arq, ptq::hfmg>({}, s);
  const auto a = sample_data(20000, 3);
  REQUIRE(std::get<1>(c).observe(a.data(), a.size()));
  const auto& h = std::get<1>(c).observer().histogram();
  const auto search = std::get<1>(c).observer().search();
  REQUIRE(search);
  ptq::activation_search_stats st;
  const auto r = ptq::finalize_with_stats(c, st);
  REQUIRE(r);
  CHECK(r.value().scale == search.value().result.scale);
  CHECK(st.count == 20000);
  REQUIRE(st.histogram.size() == 128);
  for (std::size_t g = 0; g < 128; ++g) {  // each display bin is the sum of 8 source bins
    std::int64_t sum = 0;
    for (std::size_t b = g * 8; b < g * 8 + 8; ++b)
      sum += h.counts[b];
    CHECK(st.histogram[g] == sum);
  }
  CHECK_FALSE(st.has_percentile);
  CHECK(st.candidate_loss == search.value().losses);
  CHECK(st.best == search.value().best);
  CHECK(st.clip_min == search.value().clip_min);
  CHECK(st.clip_max == search.value().clip_max);
  const auto& best = search.value().candidates[st.best];
  std::uint64_t below = 0, above = 0;
  for (std::size_t b = 0; b < h.counts.size(); ++b) {
    below += b < best.left ? static_cast<std::uint64_t>(h.counts[b]) : 0;
    above += b > best.right ? static_cast<std::uint64_t>(h.counts[b]) : 0;
  }
  CHECK(st.clipped_below == below);
  CHECK(st.clipped_above == above);
  CHECK(st.candidate_lo.back() >= st.candidate_lo.front());  // the range shrinks along the path
  CHECK(st.candidate_hi.back() <= st.candidate_hi.front());
}

TEST_CASE("keeping search statistics changes no scale: the records are byte-identical",
          "[report][digits][slow]") {
  for (const char* cfg : {"quant.cfg", "quant_hfmg.cfg", "dmq_balancer.cfg"}) {
    INFO(cfg);
    const auto& with = calibrate(cfg, true);
    const auto& without = calibrate(cfg, false);
    CHECK(ptq::write_record(with.record) == ptq::write_record(without.record));
    CHECK(with.quant_accuracy == without.quant_accuracy);
    for (const auto& l : without.session->layers())
      CHECK_FALSE(l.activation_stats);
    for (const auto& l : with.session->layers())
      CHECK(l.activation_stats.has_value() == l.plan.quant_enable);
  }
}

TEST_CASE("a report of the digits model: values from the session, JSON and HTML",
          "[report][digits][slow]") {
  const auto& r = calibrate("quant.cfg", true);
  ptq::report_summary sum;
  sum.model = "digits";
  sum.config_path = "quant.cfg";
  sum.fp32_accuracy = r.fp32_accuracy;
  sum.quantized_accuracy = r.quant_accuracy;
  const auto rep = ptq::make_report(*r.session, r.activation_sqnr_db, sum);
  REQUIRE(rep);
  const auto& R = rep.value();
  REQUIRE(R.layers.size() == 4);
  const auto& s = *r.session;
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& l = s.layers()[i];
    INFO(l.desc.name);
    CHECK(R.layers[i].name == l.desc.name);
    CHECK(R.layers[i].quant_enable == l.plan.quant_enable);
    if (!l.plan.quant_enable)
      continue;
    CHECK(R.layers[i].scale_d == l.activation_params->scale);
    CHECK(R.layers[i].balance_factors == l.balance_factors);
    CHECK(R.layers[i].activation_sqnr_db == r.activation_sqnr_db[i]);
  }
  CHECK(R.summary.batch_num == s.plan().batch_num);
  CHECK(R.layers[0].scale_w == s.layers()[0].weight_params->scale);
  CHECK(R.layers[1].balance_factors.size() == 16);
  // Without scores the sensitivity is the estimate from weight and activation SQNR.
  REQUIRE(R.sensitivity.ranked.size() == 3);
  for (std::size_t i = 1; i < R.sensitivity.ranked.size(); ++i)
    CHECK(R.sensitivity.ranked[i - 1].score_db <= R.sensitivity.ranked[i].score_db);

  const auto j = nlohmann::json::parse(ptq::report_to_json(R));
  CHECK(j["schema"] == "ptq-calibration-report");
  CHECK(j["schema_version"] == 1);
  CHECK(j["summary"]["fp32_accuracy"].get<double>() == r.fp32_accuracy);
  REQUIRE(j["layers"].size() == 4);
  CHECK(j["layers"][2]["quant_enable"] == false);  // pool: skip_layers in quant.cfg
  CHECK(j["layers"][2].size() == 3);
  CHECK(j["layers"][0]["activation"]["histogram"].size() == 128);
  CHECK(j["layers"][0]["scale_d"].get<double>() ==
        static_cast<double>(s.layers()[0].activation_params->scale));
  CHECK(j["sensitivity"]["skip_layers_line"] == R.sensitivity.skip_layers_line);

  const auto html = ptq::report_to_html(R);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("http") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  for (std::size_t i = 0; i < 4; ++i)
    CHECK(html.find("id=\"layer-" + std::to_string(i) + "\"") != std::string::npos);
  CHECK(html.find("<svg class=\"plot hist\"") != std::string::npos);
  CHECK(html.find("<svg class=\"plot dmq\"") != std::string::npos);
}

TEST_CASE("sensitivity: ranked worst first; the skip_layers line parses", "[report]") {
  const auto s = ptq::rank_sensitivity({{"a", 30.0},
                                        {"b", 12.0},
                                        {"c", std::numeric_limits<double>::quiet_NaN()},
                                        {"d", 31.0},
                                        {"e", 25.0}},
                                       "m");
  REQUIRE(s.ranked.size() == 5);
  CHECK(s.ranked[0].layer == "b");
  CHECK(s.ranked[1].layer == "e");
  CHECK(s.ranked[3].layer == "d");
  CHECK(s.ranked[4].layer == "c");  // NaN last
  // median of {12, 25, 30, 31} (lower) is 25: only b is more than 6 dB below it.
  CHECK(s.median_db == 25.0);
  CHECK(s.suggested_skip == std::vector<std::string>{"b"});
  CHECK(s.skip_layers_line == "skip_layers : \"b\"");
  // Close scores: no layer stands out, nothing is suggested.
  const auto t = ptq::rank_sensitivity({{"x", 40.0}, {"y", 39.0}, {"z", 34.5}}, "m");
  CHECK(t.median_db == 39.0);
  CHECK(t.suggested_skip.empty());
  CHECK(t.skip_layers_line.empty());
  // The report says why: how far below the median a suggested layer is, or that none stands out.
  ptq::calibration_report with, without;
  with.sensitivity = s;
  without.sensitivity = t;
  const std::string h1 = ptq::report_to_html(with);
  CHECK(h1.find("Standing out: b 13 dB below. Suggested config line") != std::string::npos);
  CHECK(h1.find("id=\"no-skip\"") == std::string::npos);
  const std::string h2 = ptq::report_to_html(without);
  CHECK(h2.find("id=\"skip-line\"") == std::string::npos);
  CHECK(h2.find("<p id=\"no-skip\">No layer stands out: every score is within 6 dB of the "
                "median, so no skip_layers line is suggested.</p>") != std::string::npos);

  const std::vector<std::string> names = {"conv1", "odd \"name\"\\x", "fc"};
  const std::string line = ptq::skip_layers_line(names);
  CHECK(line == "skip_layers : [\"conv1\", \"odd \\\"name\\\"\\\\x\", \"fc\"]");
  for (const auto& l : {line, ptq::skip_layers_line({"conv2"})}) {
    INFO(l);
    const auto c = ptq::try_parse_config("batch_num : 1\n" + l + "\n");
    REQUIRE(c.ok());
    CHECK(names_of(c.value().skip_layers) ==
          (l == line ? names : std::vector<std::string>{"conv2"}));
  }
  CHECK(ptq::skip_layers_line({}).empty());
  CHECK(ptq::combined_sqnr_db(30.0, 30.0) == Approx(30.0 - 10.0 * std::log10(2.0)));
  CHECK(ptq::combined_sqnr_db(20.0, std::nan("")) == 20.0);
}

namespace {
// The x tick labels of an SVG chart, in order.
std::vector<std::string> x_tick_labels(const std::string& svg) {
  std::vector<std::string> out;
  for (auto at = svg.find("class=\"xl\""); at != std::string::npos;
       at = svg.find("class=\"xl\"", at + 1)) {
    const auto b = svg.find('>', at) + 1;
    out.push_back(svg.substr(b, svg.find('<', b) - b));
  }
  return out;
}
}  // namespace

TEST_CASE("charts: round ticks, whole channels, markers where they are", "[report]") {
  using ptq::detail::nice_step;
  CHECK(nice_step(1.0) == 0.2);
  CHECK(nice_step(0.83) == 0.2);
  CHECK(nice_step(37.0) == 10.0);
  CHECK(nice_step(0.0) == 1.0);
  const auto t = ptq::detail::round_ticks(-0.13, 0.61, 0.2);
  REQUIRE(t.size() == 4);
  CHECK(t[0].second == "0");
  CHECK(t[1].second == "0.2");
  CHECK(t[2].second == "0.4");
  CHECK(t[3].second == "0.6");
  CHECK(t[3].first == 3 * 0.2);

  // One channel: one tick, "0", under the middle of its bar (x 66 + 350 / 2).
  ptq::detail::plot_spec one;
  one.bars = true;
  one.index_x = true;
  one.x = {0.0, 1.0};
  one.y = {0.25};
  const std::string svg1 = ptq::detail::svg_plot(one);
  CHECK(x_tick_labels(svg1) == std::vector<std::string>{"0"});
  CHECK(svg1.find("class=\"xl\" x=\"241\"") != std::string::npos);
  // Ten channels: whole-number ticks 0, 2, 4, 6, 8.
  ptq::detail::plot_spec ten = one;
  ten.x.clear();
  for (int i = 0; i <= 10; ++i)
    ten.x.push_back(i);
  ten.y.assign(10, 1.0);
  CHECK(x_tick_labels(ptq::detail::svg_plot(ten)) ==
        std::vector<std::string>{"0", "2", "4", "6", "8"});

  // A clip range wider than the data is drawn where it is: the axis spans [-1, 4], the
  // data [0, 2], the clip markers at -1 (the frame's left edge, 66) and 4 (its right, 416).
  ptq::detail::plot_spec h;
  h.bars = true;
  h.x = {0.0, 1.0, 2.0};
  h.y = {5.0, 7.0};
  h.markers = {{-1.0, "clip min", "clip"}, {4.0, "clip max", "clip"}};
  const std::string svg2 = ptq::detail::svg_plot(h);
  CHECK(x_tick_labels(svg2) == std::vector<std::string>{"-1", "0", "1", "2", "3", "4"});
  CHECK(svg2.find("<line class=\"mk clip\" x1=\"66\"") != std::string::npos);
  CHECK(svg2.find("<line class=\"mk clip\" x1=\"416\"") != std::string::npos);
  CHECK(svg2.find("M136 ") != std::string::npos);  // the bars start at 0: 66 + 350 / 5
}

TEST_CASE("report errors: E1301 before the end, E1302 without statistics, E1303 bad input",
          "[report]") {
  const auto& with = calibrate("quant_hfmg.cfg", true);
  const auto& without = calibrate("quant_hfmg.cfg", false);
  const auto e2 = ptq::make_report(*without.session, {}, {});
  REQUIRE_FALSE(e2);
  CHECK(e2.error().code == ptq::errc::report_stats_missing);
  CHECK(e2.error().message == "report: layer 'conv1' has no activation search statistics");
  const auto e3 = ptq::make_report(*with.session, {1.0, 2.0}, {});
  REQUIRE_FALSE(e3);
  CHECK(e3.error().code == ptq::errc::report_input_invalid);
  CHECK(e3.error().message == "report: 2 activation SQNR values for 4 layers");
  const auto e4 = ptq::make_report(*with.session, {}, {}, {{"nope", 1.0}}, "m");
  REQUIRE_FALSE(e4);
  CHECK(e4.error().message ==
        "report: a sensitivity score names layer 'nope', which is not in the session");
  // A session that has not seen its batches.
  const std::string text = ptq::value_or_throw(
      ptq::try_read_text_file(std::string(PTQ_EXAMPLES_DIR) + "/configs/quant_hfmg.cfg"));
  std::vector<ptq::layer_desc> descs;
  for (const auto& l : data().model.layers)
    descs.push_back(l.desc);
  auto fresh = ptq::calibration_session::create(ptq::try_parse_config(text).value(), descs);
  REQUIRE(fresh);
  const auto e1 = ptq::make_report(fresh.value(), {}, {});
  REQUIRE_FALSE(e1);
  CHECK(e1.error().code == ptq::errc::report_session_incomplete);
  CHECK(e1.error().message ==
        "report: the session is in the DMQ phase; a report needs every quantized layer "
        "calibrated");
}

TEST_CASE("a 100-layer model gives a page of at most 3 MB", "[report]") {
  ptq::calibration_report r;
  r.summary.model = "synthetic";
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> u(0.001f, 0.1f);
  std::vector<ptq::sensitivity_entry> scores;
  for (int i = 0; i < 100; ++i) {
    ptq::layer_report l;
    l.name = "block" + std::to_string(i) + ".conv";
    l.type = "Conv2d";
    l.weight_algo = "arq";
    l.activation_algo = i % 2 ? "hfmg" : "ifmr";
    l.dmq = true;
    l.weight_bits = l.activation_bits = 8;
    l.scale_d = u(gen);
    l.scale_w.resize(2048);  // wide layers: the chart shows groups of channels
    l.balance_factors.resize(2048);
    for (auto& v : l.scale_w)
      v = u(gen);
    for (auto& v : l.balance_factors)
      v = u(gen) * 10.0f;
    l.offset_w.assign(2048, 0);
    l.weight_sqnr_db = 30.0 + i % 7;
    l.activation_sqnr_db = 25.0 + i % 5;
    ptq::activation_search_stats a;
    a.algo = i % 2 ? ptq::activation_algo::hfmg : ptq::activation_algo::ifmr;
    a.count = 1000000;
    a.data_min = -1.0f;
    a.data_max = 6.0f;
    for (std::size_t b = 0; b < 128; ++b)
      a.histogram.push_back(
          static_cast<std::int64_t>(100000.0 * std::exp(-0.05 * static_cast<double>(b))));
    const std::size_t steps = i % 2 ? 3000 : 60;  // HFMG's search path can be thousands long
    for (std::size_t j = 0; j < steps; ++j) {
      a.candidate_x.push_back(static_cast<double>(j));
      a.candidate_lo.push_back(-1.0f);
      a.candidate_hi.push_back(6.0f);
      a.candidate_loss.push_back(
          1.0 + std::pow(static_cast<double>(j) - static_cast<double>(steps) / 2.0, 2.0));
    }
    a.best = steps / 2;
    a.clip_min = -1.0f;
    a.clip_max = 4.0f;
    l.activation = a;
    scores.push_back({l.name, l.activation_sqnr_db});
    r.layers.push_back(std::move(l));
  }
  r.sensitivity = ptq::rank_sensitivity(scores, "synthetic");
  const auto html = ptq::report_to_html(r);
  INFO("page bytes: " << html.size());
  CHECK(html.size() < 3u * 1024u * 1024u);
  CHECK(html.size() > 100u * 4000u);  // every layer's charts are there
  std::size_t sections = 0, plots = 0;
  for (auto at = html.find("<section class=\"layer"); at != std::string::npos;
       at = html.find("<section class=\"layer", at + 1)) {
    ++sections;
  }
  for (auto at = html.find("<svg class=\"plot"); at != std::string::npos;
       at = html.find("<svg class=\"plot", at + 1)) {
    ++plots;
  }
  CHECK(sections == 100);
  CHECK(plots == 400);  // histogram, search, weight scales, DMQ factors
}
