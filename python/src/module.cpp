// The Python module `ptq._ptq` (docs/python.md): ptq's library with its errors as ptq.Error.
// The package `ptq` (python/ptq/) wraps it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>

#include "bindings.hpp"
#include "errors.hpp"
#include "ptq/kernels/kernel_set.hpp"
#include "ptq/version.hpp"
#include "tensor_input.hpp"

PYBIND11_MODULE(_ptq, m) {
  m.doc() = "ptq: post-training quantization calibration (the C++ library's bindings)";
  m.attr("__version__") = PTQ_VERSION_STRING;
  m.attr("kernels") = ptq::kernels::default_kernels().arch_name;
  ptq_python::register_errors();
  ptq_python::bind_config(m);
  ptq_python::bind_numerics(m);
  ptq_python::bind_session(m);
  ptq_python::bind_record(m);
  // What the library is handed for a tensor (the tests check that nothing was copied).
  m.def("_view_of", [](const pybind11::object& x) {
    const ptq::tensor_view v = ptq_python::tensor_of(x, "x", "_view_of(x)");
    pybind11::dict d;
    d["data"] = reinterpret_cast<std::uintptr_t>(v.data);
    d["dtype"] = std::string(ptq::to_string(v.type));
    d["shape"] = v.shape;
    d["strides"] = v.strides;
    return d;
  });
}
