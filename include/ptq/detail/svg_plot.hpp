// Small inline SVG charts for the HTML report (report/html.hpp): bars or a line over a linear x
// axis, a linear or log10(1 + count) y axis, vertical markers and one highlighted point. No
// xmlns and no external reference: the SVG is meant to sit inside an HTML page. Coordinates are
// written with one decimal, so a chart of a few hundred points is a few KB. Standard library
// only.
// Depends on: core.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

/// Text safe inside HTML element content and attribute values.
[[nodiscard]] inline std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

/// A number for display: `digits` significant digits, locale independent; "-" for NaN.
[[nodiscard]] inline std::string num_text(double v, int digits = 4) {
  if (std::isnan(v))
    return "-";
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  std::array<char, 64> buf{};
  const auto r =
      std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::general, digits);
  return {buf.data(), r.ptr};
}

/// A coordinate with one decimal.
[[nodiscard]] inline std::string coord(double v) {
  std::array<char, 32> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), std::round(v * 10.0) / 10.0,
                               std::chars_format::fixed, 1);
  std::string s(buf.data(), r.ptr);
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0)
    s.resize(s.size() - 2);
  return s == "-0" ? "0" : s;
}

struct plot_marker {
  double x = 0.0;
  std::string label;
  std::string css_class;  ///< "clip", "pct", ...
};

/// One chart. `bars`: y[i] is the bar over [x[i], x[i+1]) (x has one more entry than y); else
/// a line through (x[i], y[i]).
struct plot_spec {
  std::string css_class;  ///< added to "plot"
  std::string title;
  std::string x_label;
  std::string y_label;
  bool bars = false;
  bool log_count = false;  ///< y axis log10(1 + y), ticks at powers of ten
  /// x is an index (a channel): bar i spans [i, i+1) and its tick, at the bar's middle, reads i;
  /// ticks are whole numbers, never "0.25" of a channel.
  bool index_x = false;
  std::vector<double> x;
  std::vector<double> y;
  std::vector<plot_marker> markers;
  std::optional<std::size_t> highlight;  ///< a point of the line to mark
  std::string highlight_label;
};

inline constexpr double plot_w = 440.0, plot_h = 210.0;
inline constexpr double plot_l = 66.0, plot_r = 24.0, plot_t = 24.0, plot_b = 38.0;

/// A round tick step for `range` in about `count` steps: 1, 2 or 5 times a power of ten.
[[nodiscard]] inline double nice_step(double range, double count = 5.0) {
  const double raw = range / count;
  if (!(raw > 0.0) || !std::isfinite(raw))
    return 1.0;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * mag;
}

/// The multiples of `step` in [lo, hi], as values and labels (a multiple computed as k·step,
/// so labels read "0.3", not "0.30000000000000004").
[[nodiscard]] inline std::vector<std::pair<double, std::string>> round_ticks(double lo, double hi,
                                                                             double step) {
  std::vector<std::pair<double, std::string>> out;
  const double first = std::ceil(lo / step - 1e-9);
  for (double k = first; k * step <= hi + step * 1e-9 && out.size() < 64; k += 1.0) {
    const double v = k == 0.0 ? 0.0 : k * step;
    out.emplace_back(v, num_text(v, 6));
  }
  return out;
}

[[nodiscard]] inline std::string svg_plot(const plot_spec& p) {
  const double iw = plot_w - plot_l - plot_r, ih = plot_h - plot_t - plot_b;
  const auto ty = [&](double v) { return p.log_count ? std::log10(1.0 + std::max(v, 0.0)) : v; };
  double x0 = 0.0, x1 = 1.0, y0 = 0.0, y1 = 1.0;
  bool first = true;
  // The x range holds the data and the markers: a clip range beyond the data (IFMR's
  // clip_min of 0 under positive data, say) is drawn where it is, not pinned to the edge.
  const auto widen_x = [&](double v) {
    if (!std::isfinite(v))
      return;
    x0 = first ? v : std::min(x0, v);
    x1 = first ? v : std::max(x1, v);
    first = false;
  };
  for (const double v : p.x)
    widen_x(v);
  for (const auto& m : p.markers)
    widen_x(m.x);
  first = true;
  for (const double v : p.y) {
    const double t = ty(v);
    if (!std::isfinite(t))
      continue;
    y0 = first ? t : std::min(y0, t);
    y1 = first ? t : std::max(y1, t);
    first = false;
  }
  if (p.bars || p.log_count)
    y0 = std::min(y0, 0.0);
  if (!(x1 > x0))
    x1 = x0 + 1.0;
  if (!(y1 > y0))
    y1 = y0 + 1.0;
  const auto sx = [&](double v) { return plot_l + (v - x0) / (x1 - x0) * iw; };
  const auto sy = [&](double v) { return plot_t + ih - (ty(v) - y0) / (y1 - y0) * ih; };
  const auto syt = [&](double t) { return plot_t + ih - (t - y0) / (y1 - y0) * ih; };
  std::string s = "<svg class=\"plot " + p.css_class + "\" viewBox=\"0 0 " + coord(plot_w) + " " +
                  coord(plot_h) + "\" width=\"" + coord(plot_w) + "\" height=\"" + coord(plot_h) +
                  R"(" role="img" aria-label=")" + html_escape(p.title) + "\"><title>" +
                  html_escape(p.title) + "</title>";
  s +=
      R"(<text class="pt" x=")" + coord(plot_l) + R"(" y="15">)" + html_escape(p.title) + "</text>";
  s += R"(<rect class="frame" x=")" + coord(plot_l) + "\" y=\"" + coord(plot_t) + "\" width=\"" +
       coord(iw) + "\" height=\"" + coord(ih) + "\"/>";
  // y ticks: powers of ten for counts, else round steps.
  std::vector<std::pair<double, std::string>> yt;
  if (p.log_count) {
    for (double c = 1.0; std::log10(1.0 + c) <= y1 + 1e-9; c *= 10.0)
      yt.emplace_back(std::log10(1.0 + c), num_text(c, 3));
  } else {
    yt = round_ticks(y0, y1, nice_step(y1 - y0));
  }
  for (const auto& [t, label] : yt) {
    const std::string y = coord(syt(t));
    s += R"(<line class="tick" x1=")" + coord(plot_l - 4) + "\" y1=\"" + y + "\" x2=\"" +
         coord(plot_l + iw) + "\" y2=\"" + y + R"("/><text class="yl" x=")" + coord(plot_l - 6) +
         "\" y=\"" + coord(syt(t) + 3.5) + "\">" + html_escape(label) + "</text>";
  }
  auto xt = p.index_x ? round_ticks(x0, x1 - 1.0, std::max(1.0, nice_step(x1 - x0)))
                      : round_ticks(x0, x1, nice_step(x1 - x0));
  for (const auto& [v, label] : xt) {
    const double at = p.index_x ? v + 0.5 : v;
    s += R"(<text class="xl" x=")" + coord(sx(at)) + "\" y=\"" + coord(plot_t + ih + 14) + "\">" +
         html_escape(label) + "</text>";
  }
  if (p.bars) {
    std::string d = "M" + coord(sx(p.x.empty() ? x0 : p.x.front())) + " " + coord(sy(0.0));
    for (std::size_t i = 0; i < p.y.size() && i + 1 < p.x.size(); ++i) {
      d += "V" + coord(sy(p.y[i])) + "H" + coord(sx(p.x[i + 1]));
    }
    d += "V" + coord(sy(0.0)) + "Z";
    s += R"(<path class="bars" d=")" + d + "\"/>";
  } else if (!p.x.empty()) {
    std::string pts;
    for (std::size_t i = 0; i < p.x.size() && i < p.y.size(); ++i) {
      if (!std::isfinite(ty(p.y[i])) || !std::isfinite(p.x[i]))
        continue;
      pts += (pts.empty() ? "" : " ") + coord(sx(p.x[i])) + "," + coord(sy(p.y[i]));
    }
    s += R"(<polyline class="line" points=")" + pts + "\"/>";
  }
  for (const auto& m : p.markers) {
    if (!std::isfinite(m.x))
      continue;
    const std::string x = coord(sx(m.x));
    s += "<line class=\"mk " + m.css_class + "\" x1=\"" + x + "\" y1=\"" + coord(plot_t) +
         "\" x2=\"" + x + "\" y2=\"" + coord(plot_t + ih) + "\"/>";
  }
  if (p.highlight && *p.highlight < p.x.size() && *p.highlight < p.y.size()) {
    const std::size_t i = *p.highlight;
    s += R"(<circle class="best" cx=")" + coord(sx(p.x[i])) + "\" cy=\"" + coord(sy(p.y[i])) +
         R"(" r="4"><title>)" + html_escape(p.highlight_label) + "</title></circle>";
  }
  s += R"(<text class="al" x=")" + coord(plot_l + iw / 2) + "\" y=\"" + coord(plot_h - 6) + "\">" +
       html_escape(p.x_label) + "</text>";
  s += "<text class=\"al\" transform=\"rotate(-90)\" x=\"" + coord(-(plot_t + ih / 2)) +
       R"(" y="11">)" + html_escape(p.y_label) + "</text></svg>";
  return s;
}

/// At most `limit` indices of [0, n): every k-th, the last, and `keep` (the chosen point).
[[nodiscard]] inline std::vector<std::size_t> sample_indices(std::size_t n, std::size_t limit,
                                                             std::size_t keep) {
  std::vector<std::size_t> idx;
  if (n == 0)
    return idx;
  const std::size_t step = n <= limit ? 1 : (n + limit - 1) / limit;
  for (std::size_t i = 0; i < n; i += step)
    idx.push_back(i);
  if (idx.back() != n - 1)
    idx.push_back(n - 1);
  if (keep < n && std::find(idx.begin(), idx.end(), keep) == idx.end()) {
    idx.insert(std::upper_bound(idx.begin(), idx.end(), keep), keep);
  }
  return idx;
}

}  // namespace detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
