// The calibration session in Python: layers described by dicts of tensors (read where they lie;
// a weight_out tensor is quantized in place), the phases (feed_dmq, quantize_weights,
// quantize_ada, feed) with the GIL released, the record, and the weights the engine runs with
// as numpy arrays over the session's memory.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "errors.hpp"
#include "ptq/config.hpp"
#include "ptq/session/calibration_session.hpp"
#include "tensor_input.hpp"

namespace ptq_python {

namespace {

/// A session and the Python objects whose memory it reads or writes (weight_out tensors).
struct py_session {
  std::optional<ptq::calibration_session> session;
  std::vector<py::object> keep;  ///< weight_out buffers, alive as long as the session
  ptq::calibration_session& get() { return *session; }
};

std::vector<float> floats_of(const py::handle& h, const std::string& what) {
  const ptq::tensor_view v = tensor_of(h, what, what);
  if (auto st = ptq::check_tensor_view(v); !st)
    throw error_exception{st.error(), {}};
  return ptq::copy_values(v);
}

std::vector<std::size_t> sizes_of(const py::dict& d, const char* key) {
  if (!d.contains(key) || d[key].is_none())
    return {};
  if (py::isinstance<py::int_>(d[key]))
    return {d[key].cast<std::size_t>()};
  return d[key].cast<std::vector<std::size_t>>();
}

ptq::activation_desc activation_of(const py::handle& h, const std::string& layer) {
  ptq::activation_desc a;
  if (h.is_none())
    return a;
  const py::dict d = py::isinstance<py::str>(h) ? py::dict(py::arg("kind") = h)
                                                : py::reinterpret_borrow<py::dict>(h);
  const auto kind = d["kind"].cast<std::string>();
  using k = ptq::activation_kind;
  const std::pair<const char*, k> kinds[] = {
      {"ReLU", k::relu}, {"ReLU6", k::relu6},          {"Sigmoid", k::sigmoid},
      {"Tanh", k::tanh}, {"LeakyReLU", k::leaky_relu}, {"PReLU", k::prelu},
      {"GELU", k::gelu}, {"RReLU", k::rrelu}};
  bool known = false;
  for (const auto& [n, kind_value] : kinds) {
    if (kind == n) {
      a.kind = kind_value;
      known = true;
    }
  }
  if (!known) {
    throw py::value_error("layer '" + layer + "': activation '" + kind +
                          "' is not one of ReLU, ReLU6, Sigmoid, Tanh, LeakyReLU, PReLU, GELU, "
                          "RReLU");
  }
  if (d.contains("negative_slope"))
    a.negative_slope = d["negative_slope"].cast<float>();
  if (d.contains("weight"))
    a.prelu_weight = floats_of(d["weight"], layer + " PReLU weight");
  if (d.contains("approximate"))
    a.gelu_tanh = d["approximate"].cast<std::string>() == "tanh";
  if (d.contains("lower"))
    a.rrelu_lower = d["lower"].cast<float>();
  if (d.contains("upper"))
    a.rrelu_upper = d["upper"].cast<float>();
  return a;
}

/// A float32 C-order tensor the session may write (a layer's weight_out).
float* writable_floats(const py::handle& h, std::size_t count, const std::string& what) {
  const ptq::tensor_view v = tensor_of(h, what, what);
  if (v.type != ptq::dtype::f32 || !v.contiguous() || v.size() != count) {
    throw py::value_error(what +
                          ": weight_out must be a float32 tensor in C order with the "
                          "weight's " +
                          std::to_string(count) + " values");
  }
  if (py::isinstance<py::array>(h) &&
      !py::reinterpret_borrow<py::array>(h).attr("flags").attr("writeable").cast<bool>())
    throw py::value_error(what + ": weight_out is read-only");
  return const_cast<float*>(static_cast<const float*>(v.data));  // the caller's writable buffer
}

/// One layer from its dict; its tensors' objects go to `keep` while the session is created.
ptq::layer_desc layer_of(const py::handle& h, std::vector<py::object>& keep,
                         std::vector<py::object>& outputs) {
  const auto d = py::reinterpret_borrow<py::dict>(h);
  ptq::layer_desc l;
  l.name = d["name"].cast<std::string>();
  l.type = layer_type_of(d["type"].cast<std::string>());
  if (d.contains("weight") && !d["weight"].is_none()) {
    keep.push_back(d["weight"]);
    l.weight = tensor_of(d["weight"], l.name + ".weight", "layer '" + l.name + "' weight");
  }
  if (d.contains("bias") && !d["bias"].is_none()) {
    keep.push_back(d["bias"]);
    l.bias = tensor_of(d["bias"], l.name + ".bias", "layer '" + l.name + "' bias");
  }
  if (d.contains("weight_out") && !d["weight_out"].is_none()) {
    outputs.push_back(d["weight_out"]);
    l.weight_out = writable_floats(d["weight_out"], l.weight.size(), "layer '" + l.name + "'");
  }
  l.conv.stride = sizes_of(d, "stride");
  l.conv.padding = sizes_of(d, "padding");
  l.conv.dilation = sizes_of(d, "dilation");
  l.conv.output_padding = sizes_of(d, "output_padding");
  if (d.contains("groups"))
    l.conv.groups = d["groups"].cast<std::size_t>();
  if (d.contains("padding_mode"))
    l.conv.padding_mode = d["padding_mode"].cast<std::string>();
  if (d.contains("batch_norm") && !d["batch_norm"].is_none()) {
    const auto bn = py::reinterpret_borrow<py::dict>(d["batch_norm"]);
    ptq::batch_norm_params p;
    p.weight = floats_of(bn["weight"], l.name + " BatchNorm weight");
    p.bias = floats_of(bn["bias"], l.name + " BatchNorm bias");
    p.running_mean = floats_of(bn["running_mean"], l.name + " BatchNorm running_mean");
    p.running_var = floats_of(bn["running_var"], l.name + " BatchNorm running_var");
    if (bn.contains("eps"))
      p.eps = bn["eps"].cast<float>();
    l.batch_norm = std::move(p);
  }
  if (d.contains("activation"))
    l.activation = activation_of(d["activation"], l.name);
  return l;
}

ptq::session_options options_of(unsigned threads, const std::string& mode, bool keep_stats,
                                std::uint64_t seed) {
  ptq::session_options o;
  o.threads = threads;
  o.keep_search_stats = keep_stats;
  o.ada_seed = seed;
  using k = ptq::activation_mode::kind;
  if (mode == "one_pass")
    o.activation.pass = k::one_pass;
  else if (mode == "bounded")
    o.activation.pass = k::bounded;
  else if (mode == "order_invariant")
    o.activation.pass = k::order_invariant;
  else
    throw py::value_error("activation mode '" + mode +
                          "' is not one of one_pass, bounded, order_invariant");
  return o;
}

/// A view of the session's float32 memory as a numpy array that keeps the session alive.
py::array array_over(const ptq::tensor_view& v, const py::object& owner) {
  return py::array_t<float>(std::vector<py::ssize_t>(v.shape.begin(), v.shape.end()), v.in_place(),
                            owner);
}

template <class Fn>
void run_released(Fn&& fn) {
  ptq::result<> st;
  {
    py::gil_scoped_release nogil;
    st = fn();
  }
  ok_or_raise(st);
}

}  // namespace

void bind_session(py::module_& m) {
  py::class_<py_session>(m, "Session", "A calibration session (ptq.Session).")
      .def(py::init([](const py::object& config, const py::list& layers, unsigned threads,
                       const std::string& mode, bool keep_search_stats, std::uint64_t ada_seed) {
             std::vector<py::object> keep, outputs;
             std::vector<ptq::layer_desc> descs;
             for (const auto& h : layers)
               descs.push_back(layer_of(h, keep, outputs));
             auto opt = options_of(threads, mode, keep_search_stats, ada_seed);
             ptq::result<ptq::calibration_session> r;
             if (py::isinstance<ptq::resolved_config>(config)) {  // a detailed JSON config
               auto plan = config.cast<ptq::resolved_config>();
               py::gil_scoped_release nogil;
               r = ptq::calibration_session::create(std::move(plan), std::move(descs),
                                                    std::move(opt));
             } else {
               const auto& cfg = config.cast<const ptq::amct_config&>();
               py::gil_scoped_release nogil;
               r = ptq::calibration_session::create(cfg, std::move(descs), std::move(opt));
             }
             py_session s;
             s.session.emplace(value_or_raise(std::move(r)));
             s.keep = std::move(outputs);
             return s;
           }),
           py::arg("config"), py::arg("layers"), py::arg("threads") = 1,
           py::arg("activation_mode") = "one_pass", py::arg("keep_search_stats") = false,
           py::arg("ada_seed") = 0)
      .def_property_readonly(
          "phase", [](py_session& s) { return std::string(ptq::to_string(s.get().phase())); })
      .def_property_readonly("activation_passes",
                             [](py_session& s) { return s.get().activation_passes(); })
      .def("dmq_layers", [](py_session& s) { return s.get().dmq_layers(); })
      .def("ada_layers", [](py_session& s) { return s.get().ada_layers(); })
      .def("pending", [](py_session& s) { return s.get().pending(); })
      .def(
          "feed_dmq",
          [](py_session& s, const std::string& name, const py::object& x) {
            const ptq::tensor_view v = tensor_of(x, name + " input", "feed_dmq(x)");
            run_released([&] { return s.get().feed_dmq(name, v); });
          },
          py::arg("name"), py::arg("x"))
      .def(
          "feed_dmq_factors",
          [](py_session& s, const std::string& name, std::vector<float> factors) {
            ok_or_raise(s.get().feed_dmq_factors(name, std::move(factors)));
          },
          py::arg("name"), py::arg("factors"),
          "Phase 2 from factors computed before (a record's tensor_balance_factor).")
      .def("quantize_weights",
           [](py_session& s) { run_released([&] { return s.get().quantize_weights(); }); })
      .def(
          "quantize_ada",
          [](py_session& s, const std::string& name, const py::object& x,
             const py::object& float_input) {
            const ptq::tensor_view v = tensor_of(x, name + " input", "quantize_ada(x)");
            std::optional<ptq::tensor_view> f;
            if (!float_input.is_none())
              f = tensor_of(float_input, name + " float input", "quantize_ada(float_input)");
            run_released([&] { return s.get().quantize_ada(name, v, f ? &*f : nullptr); });
          },
          py::arg("name"), py::arg("x"), py::arg("float_input") = py::none())
      .def(
          "feed",
          [](py_session& s, const std::string& name, const py::object& x, bool keep) {
            ptq::tensor_view v = tensor_of(x, name + " input", "feed(x)");
            if (keep)
              v.owner = python_owner(x);
            run_released([&] { return s.get().feed(name, v); });
          },
          py::arg("name"), py::arg("x"), py::arg("keep") = false,
          "One batch of the layer's input. keep=True lets the session hold x itself instead of "
          "a copy where it would copy float32 values in C order (one-pass IFMR), until the layer "
          "is finalized: x must not change until then.")
      .def("record", [](py_session& s) { return value_or_raise(s.get().record()); })
      .def(
          "weight",
          [](py::object self, const std::string& name) {
            auto& s = self.cast<py_session&>();
            return array_over(value_or_raise(s.get().weight(name)), self);
          },
          py::arg("name"),
          "The weight the engine runs with (fused, balanced, fake-quantized), a float32 array "
          "over the session's memory (or the layer's weight_out).")
      .def(
          "bias",
          [](py::object self, const std::string& name) -> py::object {
            auto& s = self.cast<py_session&>();
            const auto b = value_or_raise(s.get().bias(name));
            if (!b)
              return py::none();
            return array_over(*b, self);
          },
          py::arg("name"))
      .def(
          "layer",
          [](py_session& s, const std::string& name) {
            const ptq::session_layer* l = s.get().find(name);
            if (l == nullptr)
              throw py::key_error("no layer named '" + name + "'");
            py::dict d;
            d["name"] = l->desc.name;
            d["type"] = std::string(ptq::to_string(l->desc.type));
            d["quant_enable"] = l->plan.quant_enable;
            d["fused"] = l->fused;
            d["balance_factors"] = l->balance_factors;
            d["weight_sqnr_db"] = l->weight_sqnr_db;
            if (l->activation_params)
              d["activation"] = activation_result_dict(*l->activation_params);
            if (l->weight_params) {
              d["scale_w"] = l->weight_params->scale;
              d["offset_w"] = l->weight_params->offset;
            }
            return d;
          },
          py::arg("name"));
}

}  // namespace ptq_python
