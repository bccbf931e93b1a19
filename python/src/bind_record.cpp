// Records in Python: the toolkit's record as proto text and JSON, its entries, and the
// record-only export formats (TensorRT cache, AIMET encodings, AMCT deploy numbers, QDQ JSON).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "errors.hpp"
#include "ptq/export.hpp"
#include "ptq/io/safetensors.hpp"
#include "ptq/record_json.hpp"
#include "ptq/report/auto_calibrate.hpp"
#include "ptq/session/record.hpp"
#include "tensor_input.hpp"

namespace ptq_python {

namespace {

py::dict entry_dict(const ptq::layer_record& r) {
  py::dict d;
  d["scale_d"] = r.scale_d;
  d["offset_d"] = r.offset_d;
  d["scale_w"] = r.scale_w;
  d["offset_w"] = r.offset_w;
  d["tensor_balance_factor"] = r.tensor_balance_factor;
  d["act_type"] = r.act_type;
  d["wts_type"] = r.wts_type;
  d["fakequant_precision_mode"] = r.fakequant_precision_mode;
  return d;
}

std::string export_record(const ptq::record_file& rec, const std::string& format,
                          const std::string& trt_version, bool strict) {
  const ptq::export_format* f = ptq::find_export_format(format);
  if (f == nullptr) {
    throw py::value_error("export format '" + format + "' is not one of " +
                          ptq::export_format_names());
  }
  if (f->needs_model) {
    throw py::value_error("export format '" + format +
                          "' needs the model's layers: use `ptq export` with --model");
  }
  auto table = value_or_raise(ptq::make_qdq_table(rec));
  ptq::export_options opt;
  opt.trt_version = trt_version;
  opt.strict = strict;
  return value_or_raise(f->write(table, opt));
}

}  // namespace

void bind_record(py::module_& m) {
  py::class_<ptq::record_file>(m, "Record", "The toolkit's record: one entry per layer.")
      .def(
          "text", [](const ptq::record_file& r) { return ptq::write_record(r); },
          "The record as the toolkit's protobuf text (record.txt), byte for byte.")
      .def(
          "json",
          [](const ptq::record_file& r) {
            nlohmann::ordered_json j = r;
            return j.dump(4);
          },
          "The record as JSON.")
      .def_property_readonly("layers",
                             [](const ptq::record_file& r) {
                               py::dict out;
                               for (const auto& e : r.records)
                                 out[py::str(e.key)] = entry_dict(e.value);
                               return out;
                             })
      .def("__eq__", [](const ptq::record_file& a, const ptq::record_file& b) { return a == b; })
      .def("export", &export_record, py::arg("format"), py::arg("trt_version") = "",
           py::arg("strict") = false,
           "The record in an engine's format (trt-cache, aimet-0.6.1, aimet-1.0.0, amct-deploy, "
           "qdq-json); lossy conversions are ptq.Error with strict.");
  m.def(
      "_make_record",
      [](const std::vector<std::pair<std::string, py::dict>>& entries) {
        ptq::record_file rec;
        for (const auto& [key, d] : entries) {
          ptq::layer_record r;
          if (d.contains("scale_d"))
            r.scale_d = d["scale_d"].cast<float>();
          if (d.contains("offset_d"))
            r.offset_d = d["offset_d"].cast<std::int32_t>();
          if (d.contains("scale_w"))
            r.scale_w = d["scale_w"].cast<std::vector<float>>();
          if (d.contains("offset_w"))
            r.offset_w = d["offset_w"].cast<std::vector<std::int32_t>>();
          if (d.contains("tensor_balance_factor"))
            r.tensor_balance_factor = d["tensor_balance_factor"].cast<std::vector<float>>();
          for (const char* k : {"act_type", "wts_type", "fakequant_precision_mode"}) {
            if (d.contains(k)) {
              auto& field = std::string(k) == "act_type"   ? r.act_type
                            : std::string(k) == "wts_type" ? r.wts_type
                                                           : r.fakequant_precision_mode;
              field = d[k].cast<std::string>();
            }
          }
          rec.records.push_back({key, std::move(r)});
        }
        return rec;
      },
      py::arg("entries"), "A record from (key, fields) pairs (partial records included).");
  m.def("_combined_sqnr_db", &ptq::combined_sqnr_db, py::arg("weight_db"), py::arg("activation_db"),
        "A layer's output SQNR estimated from its weight and input SQNR (the report's).");
  m.def(
      "_auto_calibrate",
      [](const std::vector<std::pair<std::string, double>>& scores, const py::function& evaluate) {
        std::vector<ptq::sensitivity_entry> entries;
        for (const auto& [layer, db] : scores)
          entries.push_back({layer, db});
        auto r = ptq::auto_calibrate(
            std::move(entries),
            [&](const std::vector<std::string>& skip)
                -> ptq::result<ptq::auto_calibration_verdict> {
              const auto verdict = evaluate(skip).cast<std::pair<bool, double>>();
              return ptq::auto_calibration_verdict{verdict.first, verdict.second};
            });
        const auto out = value_or_raise(std::move(r));
        py::list steps;
        for (const auto& st : out.steps)
          steps.append(py::make_tuple(st.skip_layers, st.verdict.accepted, st.verdict.metric));
        py::dict d;
        d["ranking"] = out.ranking;
        d["skip_layers"] = out.skip_layers;
        d["accepted"] = out.accepted;
        d["steps"] = steps;
        return d;
      },
      py::arg("scores"), py::arg("evaluate"),
      "The toolkit's BinarySearch: evaluate(skip_layers) -> (accepted, metric) per candidate.");
  m.def(
      "parse_record",
      [](const std::string& text) { return value_or_raise(ptq::try_parse_record(text)); },
      py::arg("text"), "Reads and checks a record (proto text).");
  m.def(
      "read_safetensors",
      [](const std::string& path) {
        const auto file = value_or_raise(ptq::io::read_safetensors(path));
        py::dict out;
        for (const auto& e : file.entries) {
          if (e.dtype != "F32" && e.dtype != "F16" && e.dtype != "BF16" && e.dtype != "F64")
            continue;  // integer tensors (a BatchNorm's num_batches_tracked)
          auto t = value_or_raise(file.get(e.name));
          py::array_t<float> a(std::vector<py::ssize_t>(t.shape.begin(), t.shape.end()));
          std::copy(t.data.begin(), t.data.end(), a.mutable_data());
          out[py::str(e.name)] = a;
        }
        return out;
      },
      py::arg("path"), "A safetensors file's floating-point tensors as float32 numpy arrays.");
  m.def(
      "_write_safetensors",
      [](const std::string& path, const std::vector<std::pair<std::string, py::object>>& items) {
        std::vector<ptq::io::named_tensor> tensors;
        for (const auto& [name, t] : items) {
          const ptq::tensor_view v = tensor_of(t, name, "tensor '" + name + "'");
          ok_or_raise(ptq::check_tensor_view(v));
          tensors.push_back({name, v.shape, ptq::copy_values(v)});
        }
        ok_or_raise(ptq::io::write_safetensors(path, tensors));
      },
      py::arg("path"), py::arg("tensors"),
      "Writes (name, tensor) pairs as float32 safetensors, atomically.");
  m.def(
      "read_record_json",
      [](const std::string& text) { return value_or_raise(ptq::try_read_record_json(text)); },
      py::arg("text"), "Reads and checks a record (JSON).");
}

}  // namespace ptq_python
