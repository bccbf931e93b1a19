// Small inline SVG charts for the HTML report (report/html.hpp): bars or a line over a linear x
// axis, a linear or log10(1 + count) y axis, vertical markers and one highlighted point. No
// xmlns and no external reference: the SVG is meant to sit inside an HTML page. Coordinates are
// written with one decimal, so a chart of a few hundred points is a few KB. Standard library
// only.
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
  return std::string(buf.data(), r.ptr);
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
  std::vector<double> x;
  std::vector<double> y;
  std::vector<plot_marker> markers;
  std::optional<std::size_t> highlight;  ///< a point of the line to mark
  std::string highlight_label;
};

inline constexpr double plot_w = 440.0, plot_h = 210.0;
inline constexpr double plot_l = 66.0, plot_r = 24.0, plot_t = 24.0, plot_b = 38.0;

[[nodiscard]] inline std::string svg_plot(const plot_spec& p) {
  const double iw = plot_w - plot_l - plot_r, ih = plot_h - plot_t - plot_b;
  const auto ty = [&](double v) { return p.log_count ? std::log10(1.0 + std::max(v, 0.0)) : v; };
  double x0 = 0.0, x1 = 1.0, y0 = 0.0, y1 = 1.0;
  bool first = true;
  for (const double v : p.x) {
    if (!std::isfinite(v))
      continue;
    x0 = first ? v : std::min(x0, v);
    x1 = first ? v : std::max(x1, v);
    first = false;
  }
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
                  "\" role=\"img\" aria-label=\"" + html_escape(p.title) + "\"><title>" +
                  html_escape(p.title) + "</title>";
  s +=
      "<text class=\"pt\" x=\"" + coord(plot_l) + "\" y=\"15\">" + html_escape(p.title) + "</text>";
  s += "<rect class=\"frame\" x=\"" + coord(plot_l) + "\" y=\"" + coord(plot_t) + "\" width=\"" +
       coord(iw) + "\" height=\"" + coord(ih) + "\"/>";
  // y ticks: powers of ten for counts, else five even steps.
  std::vector<std::pair<double, std::string>> yt;
  if (p.log_count) {
    for (double c = 1.0; std::log10(1.0 + c) <= y1 + 1e-9; c *= 10.0)
      yt.emplace_back(std::log10(1.0 + c), num_text(c, 3));
  } else {
    for (int i = 0; i <= 4; ++i) {
      const double t = y0 + (y1 - y0) * i / 4.0;
      yt.emplace_back(t, num_text(t, 3));
    }
  }
  for (const auto& [t, label] : yt) {
    const std::string y = coord(syt(t));
    s += "<line class=\"tick\" x1=\"" + coord(plot_l - 4) + "\" y1=\"" + y + "\" x2=\"" +
         coord(plot_l + iw) + "\" y2=\"" + y + "\"/><text class=\"yl\" x=\"" + coord(plot_l - 6) +
         "\" y=\"" + coord(syt(t) + 3.5) + "\">" + html_escape(label) + "</text>";
  }
  for (int i = 0; i <= 4; ++i) {
    const double v = x0 + (x1 - x0) * i / 4.0;
    s += "<text class=\"xl\" x=\"" + coord(sx(v)) + "\" y=\"" + coord(plot_t + ih + 14) + "\">" +
         html_escape(num_text(v, 3)) + "</text>";
  }
  if (p.bars) {
    std::string d = "M" + coord(sx(p.x.empty() ? x0 : p.x.front())) + " " + coord(sy(0.0));
    for (std::size_t i = 0; i < p.y.size() && i + 1 < p.x.size(); ++i) {
      d += "V" + coord(sy(p.y[i])) + "H" + coord(sx(p.x[i + 1]));
    }
    d += "V" + coord(sy(0.0)) + "Z";
    s += "<path class=\"bars\" d=\"" + d + "\"/>";
  } else if (!p.x.empty()) {
    std::string pts;
    for (std::size_t i = 0; i < p.x.size() && i < p.y.size(); ++i) {
      if (!std::isfinite(ty(p.y[i])) || !std::isfinite(p.x[i]))
        continue;
      pts += (pts.empty() ? "" : " ") + coord(sx(p.x[i])) + "," + coord(sy(p.y[i]));
    }
    s += "<polyline class=\"line\" points=\"" + pts + "\"/>";
  }
  for (const auto& m : p.markers) {
    if (!std::isfinite(m.x))
      continue;
    const double cx =
        std::min(std::max(m.x, x0), x1);  // a marker outside the data sits at the edge
    const std::string x = coord(sx(cx));
    s += "<line class=\"mk " + m.css_class + "\" x1=\"" + x + "\" y1=\"" + coord(plot_t) +
         "\" x2=\"" + x + "\" y2=\"" + coord(plot_t + ih) + "\"/>";
  }
  if (p.highlight && *p.highlight < p.x.size() && *p.highlight < p.y.size()) {
    const std::size_t i = *p.highlight;
    s += "<circle class=\"best\" cx=\"" + coord(sx(p.x[i])) + "\" cy=\"" + coord(sy(p.y[i])) +
         "\" r=\"4\"><title>" + html_escape(p.highlight_label) + "</title></circle>";
  }
  s += "<text class=\"al\" x=\"" + coord(plot_l + iw / 2) + "\" y=\"" + coord(plot_h - 6) + "\">" +
       html_escape(p.x_label) + "</text>";
  s += "<text class=\"al\" transform=\"rotate(-90)\" x=\"" + coord(-(plot_t + ih / 2)) +
       "\" y=\"11\">" + html_escape(p.y_label) + "</text></svg>";
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
