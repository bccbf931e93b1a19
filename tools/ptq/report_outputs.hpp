// `ptq calibrate --report FILE.html --report-json FILE.json`: what the tool adds to the
// library's report (ptq/report/): the run's summary, the activation SQNR it measured and, for
// the bundled model, the sensitivity of each layer measured by running the network - every
// quantized layer alone (its fused, balanced, fake-quantized weight and its quantize-dequantized
// input, every other layer in FP32) against the FP32 network, as the SQNR of the logits on the
// calibration images. From files no network runs: the library's estimate from each layer's
// weight SQNR and the SQNR of its input on the last batch. The pages join the other outputs,
// written all or nothing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "bundled_calibration.hpp"
#include "calibrate_report.hpp"
#include "outputs.hpp"
#include "ptq/report/html.hpp"
#include "ptq/report/report_data.hpp"
#include "ptq/report/report_json.hpp"
#include "ptq/session/calibrate_files.hpp"

namespace ptq_cli {

/// Whether the run writes a report (the session must then keep its search statistics).
[[nodiscard]] inline bool wants_report(const calibrate_args& a) noexcept {
  return !a.report.empty() || !a.report_json.empty();
}

/// What a run knows for its report beyond the session.
struct report_context {
  ptq::report_summary summary;
  std::vector<double> activation_sqnr_db;
  std::vector<ptq::sensitivity_entry> sensitivity;  ///< empty: the library's estimate
  std::string sensitivity_method;
};

/// The bundled run: each quantized layer alone against FP32, logits SQNR on the calibration
/// images the session saw (batch_num x batch_size).
[[nodiscard]] inline ptq::result<std::vector<ptq::sensitivity_entry>> bundled_sensitivity(
    const ptq::calibration_session& s, const bundled_model& m, std::size_t batch_size,
    unsigned threads, const ptq::kernels::kernel_set& k) {
  const auto images = ptq::batch_rows(m.calib, 0, s.plan().batch_num * batch_size);
  const auto fp32 = ptq::manifest_descs(m.model);
  auto ref = ptq::forward_sequential(m.model, fp32, images, threads);
  if (!ref)
    return ref.error();
  std::vector<ptq::sensitivity_entry> out;
  for (std::size_t i = 0; i < s.layers().size(); ++i) {
    const auto& l = s.layers()[i];
    if (!l.plan.quant_enable)
      continue;
    auto descs = fp32;
    descs[i] = &l.desc;
    auto q = ptq::forward_sequential(
        m.model, descs, images, threads,
        [&](std::size_t j, ptq::io::float_tensor& x) -> ptq::result<> {
          if (j != i)
            return {};
          if (auto st = ptq::divide_by_balance_factors(l, x.data.data(), x.shape); !st)
            return st;
          (void)ptq::fake_quantize_input(l, x.data.data(), x.data.size(), k);
          return {};
        });
    if (!q)
      return q.error();
    out.push_back({l.desc.name, ptq::sqnr_db(ref.value().data.data(), q.value().data.data(),
                                             ref.value().data.size())});
  }
  return out;
}

/// The report context of the bundled run (sensitivity measured only when a report is asked).
[[nodiscard]] inline ptq::result<report_context> bundled_report_context(
    const calibrate_args& a, const ptq::calibration_session& s, const bundled_model& m,
    const bundled_result& res, const std::string& config_text, std::size_t batch_size,
    unsigned threads, const ptq::kernels::kernel_set& k) {
  report_context c;
  if (!wants_report(a))
    return c;
  c.summary.model = "the bundled digits CNN (examples/digits)";
  c.summary.config_path = a.config;
  c.summary.config_text = config_text;
  c.summary.fp32_accuracy = res.fp32_accuracy;
  c.summary.quantized_accuracy = res.quant_accuracy;
  c.summary.activation_sqnr_on = "the test split (every layer input quantized)";
  c.activation_sqnr_db = res.activation_sqnr_db;
  auto sens = bundled_sensitivity(s, m, batch_size, threads, k);
  if (!sens)
    return sens.error();
  c.sensitivity = std::move(sens).value();
  c.sensitivity_method =
      "each quantized layer alone (fake-quantized weight and input, every other layer FP32) "
      "against the FP32 network: SQNR of the logits on the " +
      std::to_string(s.plan().batch_num * batch_size) + " calibration images";
  return c;
}

/// The report context of a run from files.
[[nodiscard]] inline report_context files_report_context(const calibrate_args& a,
                                                         const ptq::calibration_session& s,
                                                         const ptq::file_calibration& r,
                                                         const std::string& config_text) {
  report_context c;
  const std::size_t last = std::min<std::size_t>(s.plan().batch_num, a.batches.size());
  c.summary.model = a.model;
  c.summary.config_path = a.config;
  c.summary.config_text = config_text;
  c.summary.activation_sqnr_on =
      "the last calibration batch (" + (last == 0 ? std::string("-") : a.batches[last - 1]) + ")";
  c.activation_sqnr_db = r.activation_sqnr_db;
  c.sensitivity_method =
      "from files, no network runs: each quantized layer's weight SQNR and the SQNR of its input "
      "on the last batch, combined as independent noises (an estimate of its output SQNR)";
  return c;
}

/// Adds the --report / --report-json files to `out`.
[[nodiscard]] inline ptq::result<> add_report_outputs(const calibrate_args& a,
                                                      const ptq::calibration_session& s,
                                                      const report_context& c,
                                                      std::vector<output_file>& out) {
  if (!wants_report(a))
    return {};
  auto rep =
      ptq::make_report(s, c.activation_sqnr_db, c.summary, c.sensitivity, c.sensitivity_method);
  if (!rep)
    return rep.error();
  if (!a.report.empty())
    out.push_back({{"--report", a.report}, ptq::report_to_html(rep.value())});
  if (!a.report_json.empty())
    out.push_back({{"--report-json", a.report_json}, ptq::report_to_json(rep.value())});
  return {};
}

}  // namespace ptq_cli
