// The calibration report as one self-contained HTML page (`ptq calibrate --report`): inline CSS,
// inline SVG charts and a 15-line inline script that sorts the tables; no network, no external
// file, no `http` anywhere in the page. Sections: the summary (model, config, algorithms,
// accuracy), the per-layer table of `ptq calibrate`'s stdout (sortable), the sensitivity
// ranking with a `skip_layers` line to paste, then one section per layer with its activation
// histogram, search curve, weight scales and DMQ factors. Sizes stay small (docs/report.md):
// 128 histogram bins, at most 240 points per search curve and 256 bars per weight chart, so a
// layer is ~10 KB and a 100-layer model well under 3 MB.
// Depends on: core and detail.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ptq/core/abi.hpp"
#include "ptq/detail/svg_plot.hpp"
#include "ptq/report/report_data.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Display limits of the page (the JSON keeps everything).
inline constexpr std::size_t report_curve_points = 240;
inline constexpr std::size_t report_channel_bars = 256;

namespace detail {

inline constexpr const char* report_css = R"(
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1180px;padding:16px 20px;color:#1d232a;background:#fff}
h1{font-size:22px;margin:4px 0 10px}h2{font-size:17px;margin:0 0 6px}h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;margin:6px 0 14px;font-size:13px}th,td{border:1px solid #d5dae0;padding:3px 8px;text-align:left}
th{background:#eef2f6}table.sortable th{cursor:pointer}table.sortable th:hover{background:#dde6ef}
td.n{text-align:right;font-variant-numeric:tabular-nums}tr.off td{color:#8a939c}
.layer{border:1px solid #d5dae0;border-radius:6px;padding:10px 12px;margin:12px 0;background:#fbfcfd}
.layer.skipped{background:#f3f4f5}.type{font-weight:normal;color:#5b6670;font-size:14px}
.facts{margin:2px 0 8px;color:#38424c}.facts b{color:#1d232a}.plots{display:flex;flex-wrap:wrap;gap:8px}
svg.plot{background:#fff;border:1px solid #e3e7eb}svg .frame{fill:none;stroke:#9aa4ad}
svg .tick{stroke:#e7ebef}svg text{font:10px system-ui,sans-serif;fill:#38424c}svg .pt{font-size:12px;font-weight:600}
svg .yl{text-anchor:end}svg .xl,svg .al{text-anchor:middle}svg .bars{fill:#5b8fc9;stroke:#3f6ea5;stroke-width:.5}
svg .line{fill:none;stroke:#3f6ea5;stroke-width:1.5}svg .mk{stroke-width:1.5}svg .clip{stroke:#d2452f}
svg .pct{stroke:#e0961c;stroke-dasharray:4 3}svg .best{fill:#d2452f}
.bar{display:inline-block;height:10px;background:#d2452f;vertical-align:middle}.bar.ok{background:#5b8fc9}
pre{background:#f3f5f7;border:1px solid #d5dae0;padding:8px;overflow:auto}
.legend i{display:inline-block;width:14px;height:3px;vertical-align:middle;margin:0 4px 0 10px}
nav a{margin-right:10px}
)";

// Sorts a table.sortable by the clicked column: numbers by data-v (empty last), else by text.
inline constexpr const char* report_script = R"(
document.querySelectorAll('table.sortable').forEach(function(t){
  t.querySelectorAll('th').forEach(function(th,i){
    th.addEventListener('click',function(){
      var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows);
      var dir=th.getAttribute('data-dir')==='up'?-1:1;th.setAttribute('data-dir',dir>0?'up':'down');
      function key(r){var c=r.cells[i],v=c.getAttribute('data-v');
        if(v===null)return c.textContent;var f=parseFloat(v);return isNaN(f)?Infinity:f;}
      rows.sort(function(a,c){var x=key(a),y=key(c);
        if(typeof x==='number'&&typeof y==='number'){return x===y?0:(x<y?-dir:dir);}
        return String(x).localeCompare(String(y))*dir;});
      rows.forEach(function(r){b.appendChild(r);});
    });
  });
});
)";

[[nodiscard]] inline std::string db_text(double v) {
  return std::isnan(v) ? "-" : num_text(v, 3) + " dB";
}

/// A numeric cell: its text and its sort value.
[[nodiscard]] inline std::string num_cell(double v, const std::string& text) {
  return R"(<td class="n" data-v=")" + (std::isfinite(v) ? num_text(v, 9) : std::string()) + "\">" +
         html_escape(text) + "</td>";
}

[[nodiscard]] inline std::string weight_scale_text(const layer_report& l) {
  if (l.scale_w.empty())
    return "-";
  const auto [lo, hi] = std::minmax_element(l.scale_w.begin(), l.scale_w.end());
  return l.scale_w.size() == 1 ? num_text(*lo, 6) : num_text(*lo, 6) + ".." + num_text(*hi, 6);
}

[[nodiscard]] inline std::string layer_table(const calibration_report& r) {
  std::string s =
      "<table class=\"sortable\" id=\"layer-table\"><thead><tr><th>layer</th><th>type</th>"
      "<th>algorithms</th><th>bits</th><th>scale_d</th><th>offset_d</th><th>weight scale</th>"
      "<th>w SQNR</th><th>a SQNR</th><th>clipped</th></tr></thead><tbody>";
  for (std::size_t i = 0; i < r.layers.size(); ++i) {
    const auto& l = r.layers[i];
    s += std::string("<tr") + (l.quant_enable ? "" : " class=\"off\"") + "><td><a href=\"#layer-" +
         std::to_string(i) + "\">" + html_escape(l.name) + "</a></td><td>" + html_escape(l.type) +
         "</td><td>" + html_escape(algorithms_text(l)) + "</td>";
    if (!l.quant_enable) {
      s += "<td></td><td class=\"n\" data-v=\"\"></td><td class=\"n\" data-v=\"\"></td><td></td>"
           "<td class=\"n\" data-v=\"\">-</td><td class=\"n\" data-v=\"\">-</td>"
           "<td class=\"n\" data-v=\"\">-</td></tr>";
      continue;
    }
    double clipped = std::nan("");
    if (l.activation && l.activation->count > 0) {
      clipped = static_cast<double>(l.activation->clipped_below + l.activation->clipped_above) /
                static_cast<double>(l.activation->count);
    }
    s += "<td>w" + std::to_string(l.weight_bits) + "a" + std::to_string(l.activation_bits) +
         "</td>" + num_cell(l.scale_d, num_text(l.scale_d, 6)) +
         num_cell(l.offset_d, std::to_string(l.offset_d)) + "<td>" +
         html_escape(weight_scale_text(l)) + "</td>" +
         num_cell(l.weight_sqnr_db, db_text(l.weight_sqnr_db)) +
         num_cell(l.activation_sqnr_db, db_text(l.activation_sqnr_db)) +
         num_cell(clipped, std::isnan(clipped) ? "-" : num_text(clipped * 100.0, 3) + " %") +
         "</tr>";
  }
  return s + "</tbody></table>";
}

[[nodiscard]] inline std::string summary_section(const calibration_report& r) {
  const auto& m = r.summary;
  std::size_t quantized = 0;
  for (const auto& l : r.layers)
    quantized += l.quant_enable ? 1 : 0;
  std::string algos;
  for (const auto& l : r.layers) {
    const std::string a = algorithms_text(l);
    if (l.quant_enable && algos.find(a) == std::string::npos)
      algos += (algos.empty() ? "" : ", ") + a;
  }
  std::string s = "<section id=\"summary\"><table><tbody>";
  const auto row = [&](const char* k, const std::string& v) {
    s += std::string("<tr><th>") + k + "</th><td>" + html_escape(v) + "</td></tr>";
  };
  row("model", m.model);
  row("config", m.config_path);
  row("layers", std::to_string(r.layers.size()) + " (" + std::to_string(quantized) +
                    " quantized, " + std::to_string(r.layers.size() - quantized) + " skipped)");
  row("algorithms", algos);
  row("batch_num", std::to_string(m.batch_num));
  if (m.fp32_accuracy && m.quantized_accuracy) {
    row("accuracy", "FP32 " + num_text(*m.fp32_accuracy * 100.0, 4) + " %, quantized " +
                        num_text(*m.quantized_accuracy * 100.0, 4) + " % (" +
                        num_text((*m.quantized_accuracy - *m.fp32_accuracy) * 100.0, 3) +
                        " points)");
  } else {
    row("accuracy", "not measured (no network runs in this flow)");
  }
  if (!m.activation_sqnr_on.empty())
    row("activation SQNR on", m.activation_sqnr_on);
  row("ptq", m.ptq_version);
  s += "</tbody></table>";
  if (!m.config_text.empty()) {
    s += "<details><summary>config text</summary><pre>" + html_escape(m.config_text) +
         "</pre></details>";
  }
  return s + "</section>";
}

[[nodiscard]] inline std::string sensitivity_section(const calibration_report& r) {
  const auto& sens = r.sensitivity;
  std::string s = "<section id=\"sensitivity\"><h2>Sensitivity</h2><p>" + html_escape(sens.method) +
                  ". Ranked worst first (lower dB is worse); a layer stands out when it is more "
                  "than " +
                  num_text(sensitivity_margin_db, 3) + " dB below the median score (" +
                  db_text(sens.median_db) + ").</p>";
  double top = 0.0;
  for (const auto& e : sens.ranked) {
    if (std::isfinite(e.score_db))
      top = std::max(top, e.score_db);
  }
  s += "<table class=\"sortable\" id=\"sensitivity-table\"><thead><tr><th>rank</th><th>layer</th>"
       "<th>score</th><th></th></tr></thead><tbody>";
  std::unordered_map<std::string_view, std::size_t> section_of;  // a layer's section number
  for (std::size_t i = 0; i < r.layers.size(); ++i)
    section_of.emplace(r.layers[i].name, i);
  const std::unordered_set<std::string_view> suggested_set(sens.suggested_skip.begin(),
                                                           sens.suggested_skip.end());
  for (std::size_t i = 0; i < sens.ranked.size(); ++i) {
    const auto& e = sens.ranked[i];
    const auto it = section_of.find(e.layer);
    const std::size_t idx = it == section_of.end() ? r.layers.size() : it->second;
    const bool suggested = suggested_set.count(e.layer) != 0;
    const double w = top > 0.0 && std::isfinite(e.score_db) ? std::max(e.score_db, 0.0) / top : 0;
    s += "<tr>" + num_cell(static_cast<double>(i + 1), std::to_string(i + 1)) +
         "<td><a href=\"#layer-" + std::to_string(idx) + "\">" + html_escape(e.layer) +
         "</a></td>" + num_cell(e.score_db, db_text(e.score_db)) + "<td><span class=\"bar" +
         (suggested ? "" : " ok") + "\" style=\"width:" + coord(4.0 + 200.0 * w) +
         "px\"></span></td></tr>";
  }
  s += "</tbody></table>";
  if (!sens.skip_layers_line.empty()) {
    std::string why;
    for (const auto& e : sens.ranked) {
      if (suggested_set.count(e.layer) != 0) {
        why += (why.empty() ? "" : ", ") + html_escape(e.layer) + " " +
               num_text(sens.median_db - e.score_db, 3) + " dB below";
      }
    }
    s += "<p>Standing out: " + why +
         ". Suggested config line (paste it into the config to keep these layers in float):</p>"
         "<pre id=\"skip-line\">" +
         html_escape(sens.skip_layers_line) + "</pre>";
  } else if (!sens.ranked.empty()) {
    s += "<p id=\"no-skip\">No layer stands out: every score is within " +
         num_text(sensitivity_margin_db, 3) +
         " dB of the median, so no skip_layers line is suggested.</p>";
  }
  return s + "</section>";
}

[[nodiscard]] inline std::string activation_facts(const activation_search_stats& a) {
  const double frac = a.count == 0 ? 0.0
                                   : static_cast<double>(a.clipped_below + a.clipped_above) /
                                         static_cast<double>(a.count);
  std::string s = " &middot; clip range <b>[" + num_text(a.clip_min, 5) + ", " +
                  num_text(a.clip_max, 5) + "]</b>";
  if (a.has_percentile) {
    s += " &middot; percentile start [" + num_text(a.percentile_min, 5) + ", " +
         num_text(a.percentile_max, 5) + "]";
  }
  s += " &middot; clipped <b>" + num_text(frac * 100.0, 3) + " %</b> (" +
       std::to_string(a.clipped_below) + " below, " + std::to_string(a.clipped_above) +
       " above, of " + std::to_string(a.count) + ")";
  return s;
}

[[nodiscard]] inline std::string histogram_plot(const activation_search_stats& a) {
  plot_spec p;
  p.css_class = "hist";
  p.title = "activation histogram (" + std::to_string(a.histogram.size()) + " bins)";
  p.x_label = "value";
  p.y_label = "count (log)";
  p.bars = true;
  p.log_count = true;
  const std::size_t nb = a.histogram.size();
  for (std::size_t b = 0; b <= nb; ++b) {
    p.x.push_back(static_cast<double>(a.data_min) +
                  (static_cast<double>(a.data_max) - static_cast<double>(a.data_min)) *
                      static_cast<double>(b) / static_cast<double>(nb == 0 ? 1 : nb));
  }
  for (const auto c : a.histogram)
    p.y.push_back(static_cast<double>(c));
  p.markers.push_back({a.clip_min, "clip min", "clip"});
  p.markers.push_back({a.clip_max, "clip max", "clip"});
  if (a.has_percentile) {
    p.markers.push_back({a.percentile_min, "percentile start min", "pct"});
    p.markers.push_back({a.percentile_max, "percentile start max", "pct"});
  }
  return svg_plot(p);
}

[[nodiscard]] inline std::string search_plot(const activation_search_stats& a) {
  plot_spec p;
  p.css_class = "search";
  const bool ifmr = a.algo == activation_algo::ifmr;
  p.title = ifmr ? "IFMR loss per clip ratio" : "HFMG search path: L2 loss per step";
  p.x_label = ifmr ? "candidate ratio" : "search step (the range shrinks)";
  p.y_label = ifmr ? "squared error" : "L2 loss";
  const auto idx = sample_indices(a.candidate_loss.size(), report_curve_points, a.best);
  std::size_t best_pos = 0;
  for (const auto i : idx) {
    if (i == a.best)
      best_pos = p.x.size();
    p.x.push_back(a.candidate_x[i]);
    p.y.push_back(a.candidate_loss[i]);
  }
  if (!idx.empty()) {
    p.highlight = best_pos;
    p.highlight_label = "chosen: " + num_text(a.candidate_x[a.best], 5);
  }
  return svg_plot(p);
}

/// Per-channel values as bars; above report_channel_bars channels each bar is a group's largest.
[[nodiscard]] inline std::string channel_plot(const std::vector<float>& v, std::string css,
                                              std::string title, std::string y_label) {
  plot_spec p;
  p.css_class = std::move(css);
  p.bars = true;
  p.index_x = true;
  p.y_label = std::move(y_label);
  const std::size_t n = v.size();
  const std::size_t group =
      n <= report_channel_bars ? 1 : (n + report_channel_bars - 1) / report_channel_bars;
  for (std::size_t g = 0; g * group < n; ++g) {
    float m = v[g * group];
    for (std::size_t i = g * group; i < std::min(n, (g + 1) * group); ++i)
      m = std::max(m, v[i]);
    p.x.push_back(static_cast<double>(g * group));
    p.y.push_back(static_cast<double>(m));
  }
  p.x.push_back(static_cast<double>(n));
  p.title = std::move(title) + (group > 1 ? " (max of " + std::to_string(group) + ")" : "");
  p.x_label = "channel";
  return svg_plot(p);
}

[[nodiscard]] inline std::string layer_section(const layer_report& l, std::size_t i) {
  std::string s = std::string("<section class=\"layer") + (l.quant_enable ? "" : " skipped") +
                  "\" id=\"layer-" + std::to_string(i) + "\"><h2>" + html_escape(l.name) +
                  " <span class=\"type\">" + html_escape(l.type) + "</span></h2>";
  if (!l.quant_enable)
    return s + "<p class=\"facts\">skipped by the config (quant_enable false)</p></section>";
  s += "<p class=\"facts\"><b>" + html_escape(algorithms_text(l)) + "</b> &middot; w" +
       std::to_string(l.weight_bits) + "a" + std::to_string(l.activation_bits) +
       " &middot; scale_d " + num_text(l.scale_d, 6) + ", offset_d " + std::to_string(l.offset_d) +
       " &middot; weight SQNR <b>" + db_text(l.weight_sqnr_db) +
       "</b> &middot; activation SQNR <b>" + db_text(l.activation_sqnr_db) + "</b>";
  if (l.activation)
    s += activation_facts(*l.activation);
  s += "</p><div class=\"plots\">";
  if (l.activation) {
    s += histogram_plot(*l.activation);
    s += search_plot(*l.activation);
  }
  if (!l.scale_w.empty()) {
    s += channel_plot(
        l.scale_w, "wscale",
        l.scale_w.size() == 1 ? "weight scale (per tensor)" : "per-channel weight scale",
        "scale_w");
  }
  if (!l.balance_factors.empty())
    s += channel_plot(l.balance_factors, "dmq", "DMQ balance factors", "factor");
  return s + "</div></section>";
}

}  // namespace detail

/// The report as one HTML page.
[[nodiscard]] inline std::string report_to_html(const calibration_report& r) {
  std::string s =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" "
      "content=\"width=device-width, initial-scale=1\"><title>ptq calibration report: " +
      detail::html_escape(r.summary.model) + "</title><style>" + detail::report_css +
      "</style></head><body><h1>ptq calibration report</h1><nav><a href=\"#summary\">summary</a>"
      "<a href=\"#layer-table\">layers</a><a href=\"#sensitivity\">sensitivity</a>"
      "<a href=\"#layers\">per layer</a></nav>";
  s += detail::summary_section(r);
  s += "<h3>Layers (click a column to sort)</h3>" + detail::layer_table(r);
  s += detail::sensitivity_section(r);
  s += "<section id=\"layers\"><h2>Per layer</h2><p class=\"legend\">histogram: count on a log "
       "axis<i style=\"background:#d2452f\"></i>chosen clip range<i "
       "style=\"background:#e0961c\"></i>IFMR percentile start; search: the red dot is the "
       "chosen candidate (first minimum)</p>";
  for (std::size_t i = 0; i < r.layers.size(); ++i)
    s += detail::layer_section(r.layers[i], i);
  s += "</section><script>" + std::string(detail::report_script) + "</script></body></html>\n";
  return s;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
