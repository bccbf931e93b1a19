// A Python tensor as a ptq::tensor_view, without a copy: a numpy array (float32 or float16,
// any strides, read through the array C-API) or a CPU torch tensor (float32, float16 or
// bfloat16, any strides, read from its data_ptr(), shape and stride(); no libtorch is linked,
// and torch is never imported here: an object can only be a torch.Tensor when torch is in
// sys.modules already). Anything else is a TypeError or ValueError naming the argument.
// The caller holds the object (a py::object argument) for as long as the view is used.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ptq/core/tensor_view.hpp"

namespace ptq_python {

namespace py = pybind11;

namespace detail {

inline ptq::tensor_view from_numpy(const py::array& a, const std::string& what) {
  ptq::tensor_view v;
  const py::dtype dt = a.dtype();
  const auto item = static_cast<std::ptrdiff_t>(a.itemsize());
  if (dt.kind() == 'f' && item == 4) {
    v.type = ptq::dtype::f32;
  } else if (dt.kind() == 'f' && item == 2) {
    v.type = ptq::dtype::f16;
  } else {
    throw py::type_error(what + ": a numpy array of float32 or float16 is needed, got " +
                         std::string(py::str(static_cast<const py::handle&>(dt))));
  }
  if (!dt.attr("isnative").cast<bool>())
    throw py::type_error(what + ": the array's byte order is not the machine's");
  v.data = a.data();
  v.shape.clear();
  for (py::ssize_t i = 0; i < a.ndim(); ++i) {
    if (a.strides(i) % item != 0) {
      throw py::value_error(what + ": stride " + std::to_string(a.strides(i)) + " of axis " +
                            std::to_string(i) + " is not a multiple of the item size");
    }
    v.shape.push_back(static_cast<std::size_t>(a.shape(i)));
    v.strides.push_back(static_cast<std::ptrdiff_t>(a.strides(i)) / item);
  }
  return v;
}

/// torch, when it is imported and `o` is one of its tensors; a null object otherwise.
inline py::object torch_of(const py::handle& o) {
  const py::dict modules = py::module_::import("sys").attr("modules");
  if (!modules.contains("torch"))
    return {};
  py::object torch = modules["torch"];
  if (!py::isinstance(o, torch.attr("Tensor")))
    return {};
  return torch;
}

inline ptq::tensor_view from_torch(const py::handle& t, const py::object& torch,
                                   const std::string& what) {
  if (t.attr("device").attr("type").cast<std::string>() != "cpu")
    throw py::value_error(what + ": the tensor is not on the CPU; call .cpu() first");
  if (!t.attr("layout").is(torch.attr("strided")))
    throw py::value_error(what + ": a sparse tensor; call .to_dense() first");
  if (t.attr("is_neg")().cast<bool>())
    throw py::value_error(what + ": a negated view; call .resolve_neg() first");
  ptq::tensor_view v;
  const py::object dt = t.attr("dtype");
  if (dt.is(torch.attr("float32"))) {
    v.type = ptq::dtype::f32;
  } else if (dt.is(torch.attr("float16"))) {
    v.type = ptq::dtype::f16;
  } else if (dt.is(torch.attr("bfloat16"))) {
    v.type = ptq::dtype::bf16;
  } else {
    throw py::type_error(what + ": a torch tensor of float32, float16 or bfloat16 is needed, got " +
                         std::string(py::str(static_cast<const py::handle&>(dt))));
  }
  // data_ptr() includes the storage offset; stride() counts elements.
  v.data = reinterpret_cast<const void*>(t.attr("data_ptr")().cast<std::uintptr_t>());
  v.shape.clear();
  for (const auto s : t.attr("shape"))
    v.shape.push_back(s.cast<std::size_t>());
  for (const auto s : t.attr("stride")())
    v.strides.push_back(s.cast<std::ptrdiff_t>());
  return v;
}

}  // namespace detail

/// `o` as a view named `name` (in ptq's messages); `what` names the argument in Python's.
inline ptq::tensor_view tensor_of(const py::handle& o, std::string name, const std::string& what) {
  ptq::tensor_view v;
  if (py::isinstance<py::array>(o)) {
    v = detail::from_numpy(py::reinterpret_borrow<py::array>(o), what);
  } else if (const py::object torch = detail::torch_of(o)) {
    v = detail::from_torch(o, torch, what);
  } else {
    throw py::type_error(what + ": a numpy.ndarray or a torch.Tensor is needed, got " +
                         std::string(py::str(py::type::of(o).attr("__name__"))));
  }
  v.name = std::move(name);
  return v;
}

/// A reference to `o` as a tensor_view::owner, so that an observer may keep the view instead of a
/// copy. Released with the GIL taken, from whichever thread drops the last copy; never after
/// the interpreter has finalized (the object is then left to the process's exit).
inline std::shared_ptr<const void> python_owner(const py::handle& o) {
  PyObject* const p = o.inc_ref().ptr();
  return std::shared_ptr<const void>(p, [](const void* q) {
    if (Py_IsInitialized() == 0)
      return;
    const py::gil_scoped_acquire gil;
    Py_DECREF(static_cast<PyObject*>(const_cast<void*>(q)));
  });
}

}  // namespace ptq_python
