// The numerical kernels in Python: the IFMR and HFMG observers (observe, estimate, reset), ARQ
// weights and DMQ factors. Tensors are read where they lie (tensor_input.hpp) with the GIL
// released while the library works.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "errors.hpp"
#include "ptq/algorithms/activations/dmq.hpp"
#include "ptq/algorithms/activations/hfmg.hpp"
#include "ptq/algorithms/activations/ifmr.hpp"
#include "ptq/algorithms/policies.hpp"
#include "ptq/algorithms/weights/arq.hpp"
#include "ptq/core/layer_type.hpp"
#include "tensor_input.hpp"

namespace ptq_python {

ptq::layer_type layer_type_of(const std::string& name) {
  const auto t = ptq::layer_type_from_string(name);
  if (!t) {
    throw py::value_error("layer type '" + name +
                          "' is not one ptq calibrates (Conv1d, Conv2d, Conv3d, ConvTranspose1d, "
                          "ConvTranspose2d, Linear, AvgPool2d)");
  }
  return *t;
}

py::dict activation_result_dict(const ptq::activation_quant_result& r) {
  py::dict d;
  d["scale"] = r.scale;
  d["offset"] = r.offset;
  d["bits"] = r.bits;
  d["clip_min"] = r.clip_min;
  d["clip_max"] = r.clip_max;
  return d;
}

namespace {

/// An observer of either algorithm behind the Python class's methods.
template <class Observer>
void bind_observer(py::module_& m, const char* name, const char* doc) {
  py::class_<Observer>(m, name, doc)
      .def(
          "observe",
          [](Observer& o, const py::object& x) {
            const ptq::tensor_view v = tensor_of(x, "batch", "observe(x)");
            ptq::result<> st;
            {
              py::gil_scoped_release nogil;
              st = o.observe(v);
            }
            ok_or_raise(st);
          },
          py::arg("x"), "Adds one batch (any float32/float16/bfloat16 tensor, any strides).")
      .def(
          "estimate",
          [](const Observer& o) {
            ptq::result<ptq::activation_quant_result> r;
            {
              py::gil_scoped_release nogil;
              r = o.estimate();
            }
            return activation_result_dict(value_or_raise(std::move(r)));
          },
          "scale, offset, bits, clip_min, clip_max of the batches so far (changes nothing).")
      .def("reset", &Observer::reset, "Forgets every batch.");
}

}  // namespace

void bind_numerics(py::module_& m) {
  bind_observer<ptq::ifmr_observer>(m, "_IfmrObserver", "IFMR (ptq.IfmrObserver).");
  m.def(
      "_make_ifmr",
      [](int bits, bool asymmetric, double max_percentile, double min_percentile,
         std::pair<double, double> search_range, double search_step, unsigned threads) {
        ptq::ifmr_settings s;
        s.bits = bits;
        s.asymmetric = asymmetric;
        s.max_percentile = max_percentile;
        s.min_percentile = min_percentile;
        s.search_range_start = search_range.first;
        s.search_range_end = search_range.second;
        s.search_step = search_step;
        s.threads = threads;
        ok_or_raise(ptq::ifmr::check(s));
        return ptq::ifmr_observer(s, ptq::kernels::default_kernels(), "activation");
      },
      py::arg("bits"), py::arg("asymmetric"), py::arg("max_percentile"), py::arg("min_percentile"),
      py::arg("search_range"), py::arg("search_step"), py::arg("threads"));
  bind_observer<ptq::hfmg_observer>(m, "_HfmgObserver", "HFMG (ptq.HfmgObserver).");
  m.def(
      "_make_hfmg",
      [](std::size_t num_of_bins, int bits, bool asymmetric, unsigned threads) {
        ptq::hfmg_settings s;
        s.num_of_bins = num_of_bins;
        s.bits = bits;
        s.asymmetric = asymmetric;
        s.threads = threads;
        ok_or_raise(ptq::hfmg::check(s));
        return ptq::hfmg_observer(s, ptq::kernels::default_kernels(), "activation");
      },
      py::arg("num_of_bins"), py::arg("bits"), py::arg("asymmetric"), py::arg("threads"));

  m.def(
      "arq",
      [](const py::object& weight, const std::string& type, std::size_t groups, int bits,
         bool channel_wise, bool fake_quantize) {
        const ptq::tensor_view w = tensor_of(weight, "weight", "arq(weight)");
        const ptq::layer_type op = layer_type_of(type);
        ptq::result<ptq::weight_quant_result> r;
        py::array_t<float> fq;
        float* out = nullptr;
        if (fake_quantize) {
          fq = py::array_t<float>(std::vector<py::ssize_t>(w.shape.begin(), w.shape.end()));
          out = fq.mutable_data();
        }
        ptq::result<> st;
        {
          py::gil_scoped_release nogil;
          r = ptq::arq_calibrate(w, op, groups, ptq::arq_settings{bits, channel_wise});
          if (r && out != nullptr)
            st = ptq::arq_fake_quantize(w, op, groups, r.value(), out);
        }
        const ptq::weight_quant_result p = value_or_raise(std::move(r));
        ok_or_raise(st);
        py::dict d;
        d["scale"] = p.scale;
        d["offset"] = p.offset;
        d["bits"] = p.bits;
        if (fake_quantize)
          d["weight"] = fq;
        return d;
      },
      py::arg("weight"), py::arg("type"), py::arg("groups") = 1, py::arg("bits") = 8,
      py::arg("channel_wise") = true, py::arg("fake_quantize") = false,
      "ARQ scale_w / offset_w of a weight in its native layout (and, with fake_quantize, the "
      "fake-quantized weight as a new float32 array).");

  m.def(
      "dmq_factors",
      [](const py::object& activation, const py::object& weight, const std::string& type,
         std::size_t groups, double migration_strength) {
        const ptq::tensor_view a = tensor_of(activation, "activation", "dmq_factors(activation)");
        const ptq::tensor_view w = tensor_of(weight, "weight", "dmq_factors(weight)");
        const ptq::layer_type op = layer_type_of(type);
        ptq::result<std::vector<float>> r;
        {
          py::gil_scoped_release nogil;
          r = ptq::dmq_factors(a, w, op, groups, ptq::dmq_settings{migration_strength});
        }
        return value_or_raise(std::move(r));
      },
      py::arg("activation"), py::arg("weight"), py::arg("type"), py::arg("groups") = 1,
      py::arg("migration_strength") = 0.5,
      "DMQ tensor_balance_factor (one per input channel) from one activation batch and the "
      "weight.");
}

}  // namespace ptq_python
