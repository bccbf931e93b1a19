// ptq's errors in Python: every ptq::error becomes a ptq.Error (ptq/__init__.py defines it, a
// ValueError) carrying code ("E909"), name ("tensor_view_invalid"), message, path, line, column,
// note and warnings; a result's value or the exception.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

#include "ptq/core/error.hpp"

namespace ptq_python {

namespace py = pybind11;

/// "E909" or "W606".
inline std::string code_of(const ptq::error& e) {
  return std::string(ptq::is_error(e) ? "E" : "W") + std::to_string(static_cast<int>(e.code));
}

/// Thrown by the bindings; translated into ptq.Error with the error's fields.
struct error_exception {
  ptq::error error;
  std::vector<ptq::error> warnings;
};

/// A warning as a Python dict.
inline py::dict warning_dict(const ptq::error& e) {
  py::dict d;
  d["code"] = code_of(e);
  d["name"] = std::string(ptq::to_string(e.code));
  d["message"] = e.message;
  d["path"] = e.path;
  d["line"] = e.where.begin.line;
  d["column"] = e.where.begin.column;
  d["note"] = e.note;
  return d;
}

/// The value of `r`, or error_exception with its first error.
template <class T>
T value_or_raise(ptq::result<T> r) {
  if (!r)
    throw error_exception{r.error(), r.warnings()};
  return std::move(r).value();
}

inline void ok_or_raise(const ptq::result<>& r) {
  if (!r)
    throw error_exception{r.error(), r.warnings()};
}

/// Registers the translation of error_exception into ptq.Error.
inline void register_errors() {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const error_exception& x) {
      const ptq::error& e = x.error;
      const py::object cls = py::module_::import("ptq").attr("Error");
      py::list warnings;
      for (const auto& w : x.warnings)
        warnings.append(warning_dict(w));
      const py::object inst =
          cls(e.message, py::arg("code") = code_of(e),
              py::arg("name") = std::string(ptq::to_string(e.code)), py::arg("path") = e.path,
              py::arg("line") = e.where.begin.line, py::arg("column") = e.where.begin.column,
              py::arg("note") = e.note, py::arg("warnings") = warnings);
      PyErr_SetObject(cls.ptr(), inst.ptr());
    } catch (const ptq::exception& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
}

}  // namespace ptq_python
