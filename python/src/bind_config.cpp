// Configs in Python: parse and check a simple quantization config (both dialects), its
// canonical text, resolution for a list of layers and the toolkit's detailed JSON.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "errors.hpp"
#include "ptq/config.hpp"
#include "ptq/config/json_reader.hpp"
#include "ptq/config/json_writer.hpp"

namespace ptq_python {

namespace {

/// A layer list entry: {"name", "type", "bias" (True), "in_channels", "groups" (1),
/// "out_channels"}, as ptq resolve's LAYERS.json has them.
ptq::layer_info layer_info_from(const py::handle& h) {
  const auto d = py::reinterpret_borrow<py::dict>(h);
  ptq::layer_info l;
  if (!d.contains("name") || !d.contains("type"))
    throw py::value_error("a layer needs \"name\" and \"type\"");
  l.name = d["name"].cast<std::string>();
  l.type = layer_type_of(d["type"].cast<std::string>());
  if (d.contains("bias"))
    l.has_bias = d["bias"].cast<bool>();
  if (d.contains("in_channels"))
    l.in_channels = d["in_channels"].cast<std::uint32_t>();
  if (d.contains("out_channels"))
    l.out_channels = d["out_channels"].cast<std::uint32_t>();
  if (d.contains("groups"))
    l.groups = d["groups"].cast<std::uint32_t>();
  return l;
}

py::dict layer_plan_dict(const ptq::resolved_layer& l) {
  py::dict d;
  d["name"] = l.name;
  d["quant_enable"] = l.quant_enable;
  d["dmq_balancer_param"] = l.dmq_balancer_param;
  d["act_algo"] = std::string(ptq::to_string(l.activation.algo));
  d["act_bits"] = l.activation.num_bits;
  d["asymmetric"] = l.activation.asymmetric;
  if (l.weight) {
    d["wts_algo"] = std::string(ptq::to_string(l.weight->algo));
    d["wts_bits"] = l.weight->num_bits;
    d["channel_wise"] = l.weight->channel_wise;
  }
  return d;
}

}  // namespace

void bind_config(py::module_& m) {
  py::class_<ptq::amct_config>(m, "Config", "A checked simple quantization config.")
      .def_property_readonly(
          "batch_num",
          [](const ptq::amct_config& c) { return c.batch_num.value_or(ptq::defaults::batch_num); })
      .def(
          "text", [](const ptq::amct_config& c) { return ptq::write_config(c); },
          "The config as canonical proto text.")
      .def(
          "resolve",
          [](const ptq::amct_config& c, const py::list& layers, bool strict) {
            std::vector<ptq::layer_info> infos;
            for (const auto& h : layers)
              infos.push_back(layer_info_from(h));
            return value_or_raise(ptq::resolve_config(c, infos, ptq::resolve_options{strict}));
          },
          py::arg("layers"), py::arg("strict") = false,
          "The per-layer plan for `layers` (dicts: name, type, bias, in_channels, groups).");

  py::class_<ptq::resolved_config>(m, "Plan", "A config resolved per layer.")
      .def_property_readonly("batch_num", [](const ptq::resolved_config& p) { return p.batch_num; })
      .def_property_readonly("layers",
                             [](const ptq::resolved_config& p) {
                               py::list out;
                               for (const auto& l : p.layers)
                                 out.append(layer_plan_dict(l));
                               return out;
                             })
      .def(
          "toolkit_json", [](const ptq::resolved_config& p) { return ptq::to_toolkit_json(p); },
          "The detailed JSON config, byte for byte as the toolkit writes it.");

  m.def(
      "parse_config",
      [](const std::string& text, const std::string& path) {
        auto r = ptq::try_parse_config(text);
        if (!r) {
          ptq::error e = r.error();
          if (e.path.empty())
            e.path = path;
          throw error_exception{e, r.warnings()};
        }
        return std::move(r).value();
      },
      py::arg("text"), py::arg("path") = "config",
      "Parses and checks a simple quantization config (ptq.Error with its line and column).");
  m.def(
      "read_quant_config",
      [](const std::string& json) { return value_or_raise(ptq::try_read_quant_config(json)); },
      py::arg("json"), "Reads the toolkit's detailed JSON config.");
}

}  // namespace ptq_python
