// The parts of the Python module `ptq._ptq`, one registration function per file, and the
// conversions they share.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "ptq/algorithms/activations/activation.hpp"
#include "ptq/core/layer_type.hpp"

namespace ptq_python {

namespace py = pybind11;

void bind_config(py::module_& m);    // bind_config.cpp
void bind_numerics(py::module_& m);  // bind_numerics.cpp
void bind_session(py::module_& m);   // bind_session.cpp
void bind_record(py::module_& m);    // bind_record.cpp

/// "Conv2d" -> layer_type; ValueError naming the types otherwise.
[[nodiscard]] ptq::layer_type layer_type_of(const std::string& name);

/// scale, offset, bits, clip_min, clip_max.
[[nodiscard]] py::dict activation_result_dict(const ptq::activation_quant_result& r);

}  // namespace ptq_python
