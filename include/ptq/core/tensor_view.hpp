// The one tensor view every public call takes for a tensor it reads (batches and weights alike):
// a pointer into memory someone else owns, an element type (float32, float16 or bfloat16), a
// shape and element strides. It reads any layout the strides describe (a transposed, sliced or
// broadcast tensor too) as float32 in C order, a block at a time, so a float16 or strided input
// never needs a float32 copy of its own; float32 in C order is read where it lies. Also the two
// 16-bit -> float32 conversions (.npy, safetensors, the Python module).
// Depends on: the standard library.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// binary16 bits -> float32 (exact: every binary16 value, subnormals, infinities and NaN
/// payloads included, is a float32 value).
[[nodiscard]] inline float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000U) << 16;
  std::uint32_t exp = (h >> 10) & 0x1FU;
  std::uint32_t man = h & 0x3FFU;
  std::uint32_t bits = sign;
  if (exp == 0x1F) {
    bits |= 0x7F800000U | (man << 13);
  } else if (exp != 0) {
    bits |= ((exp + 112U) << 23) | (man << 13);
  } else if (man != 0) {  // subnormal: normalise
    exp = 113;
    while ((man & 0x400U) == 0) {
      man <<= 1;
      --exp;
    }
    bits |= (exp << 23) | ((man & 0x3FFU) << 13);
  }
  float f = 0.0F;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// bfloat16 bits -> float32 (exact: bfloat16 is float32's upper half).
[[nodiscard]] inline float bfloat16_to_float(std::uint16_t h) noexcept {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f = 0.0F;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// The element types a tensor_view reads (little-endian, as .npy '<f4'/'<f2', safetensors and
/// the x86 and ARM CPUs store them).
enum class dtype : std::uint8_t { f32, f16, bf16 };

[[nodiscard]] constexpr std::size_t dtype_size(dtype t) noexcept {
  return t == dtype::f32 ? 4 : 2;
}

[[nodiscard]] constexpr std::string_view to_string(dtype t) noexcept {
  switch (t) {
    case dtype::f32:
      return "float32";
    case dtype::f16:
      return "float16";
    case dtype::bf16:
      return "bfloat16";
  }
  return "?";
}

/// The number of values a tensor of `shape` holds (1 for a scalar).
[[nodiscard]] inline std::size_t shape_size(const std::vector<std::size_t>& shape) noexcept {
  std::size_t n = 1;
  for (auto d : shape)
    n *= d;
  return n;
}

/// A tensor in memory the caller owns and keeps valid while the call that takes the view runs.
/// `strides` count elements, one per axis (PyTorch's stride(); NumPy's byte strides divided by
/// the item size), and may be negative or 0 (a broadcast axis); empty means C order,
/// contiguous. check_tensor_view says whether a view can be read. A default view is empty
/// (shape [0]); a scalar has shape [].
struct tensor_view {
  const void* data = nullptr;
  dtype type = dtype::f32;
  std::vector<std::size_t> shape{0};
  std::vector<std::ptrdiff_t> strides;
  std::string name = "tensor";  ///< for messages: "conv1 input", "fc.weight"
  /// What keeps `data` valid, when someone shares it (a mapped .npy or safetensors file sets
  /// it; an engine's own buffer leaves it empty). An observer that would copy a float32 batch
  /// keeps a view plus this owner instead (ifmr_observer), so its pages are never copied.
  std::shared_ptr<const void> owner;

  [[nodiscard]] std::size_t size() const noexcept { return shape_size(shape); }
  [[nodiscard]] std::size_t rank() const noexcept { return shape.size(); }
  /// Bytes per value.
  [[nodiscard]] std::size_t item() const noexcept { return dtype_size(type); }

  /// Whether the values lie in C order with nothing between them (axes of extent 1 may have
  /// any stride, as NumPy and PyTorch give them).
  [[nodiscard]] bool contiguous() const noexcept {
    if (strides.empty())
      return true;
    std::ptrdiff_t expected = 1;
    for (std::size_t a = shape.size(); a-- > 0;) {
      if (shape[a] != 1 && strides[a] != expected)
        return false;
      expected *= static_cast<std::ptrdiff_t>(shape[a]);
    }
    return true;
  }

  /// The values themselves when they are float32, contiguous and at an address a float may
  /// have; else nullptr (then they are read through convert()).
  [[nodiscard]] const float* in_place() const noexcept {
    if (type != dtype::f32 || data == nullptr || size() == 0 || !contiguous() ||
        reinterpret_cast<std::uintptr_t>(data) % alignof(float) != 0)
      return nullptr;
    return static_cast<const float*>(data);
  }

  /// Values [at, at + n) in C order as float32 into out[0, n). Requires at + n <= size() and a
  /// view check_tensor_view accepts.
  void convert(std::size_t at, std::size_t n, float* out) const noexcept {
    if (n == 0)
      return;
    const char* base = static_cast<const char*>(data);
    if (contiguous()) {
      convert_run(base + at * item(), 1, n, out);
      return;
    }
    walk(
        at, n,
        [&](std::ptrdiff_t offset, std::ptrdiff_t step, std::size_t run, float* dst) {
          convert_run(base + offset * static_cast<std::ptrdiff_t>(item()), step, run, dst);
        },
        out);
  }

  /// Value i (C order) as float32.
  [[nodiscard]] float at(std::size_t i) const noexcept {
    float v = 0.0F;
    convert(i, 1, &v);
    return v;
  }

 private:
  /// `n` values `step` elements apart from `src` into out[0, n).
  void convert_run(const char* src, std::ptrdiff_t step, std::size_t n, float* out) const noexcept {
    const std::ptrdiff_t bytes = step * static_cast<std::ptrdiff_t>(item());
    if (type == dtype::f32) {
      if (step == 1) {
        std::memcpy(out, src, n * 4);
        return;
      }
      for (std::size_t i = 0; i < n; ++i, src += bytes)
        std::memcpy(out + i, src, 4);
      return;
    }
    for (std::size_t i = 0; i < n; ++i, src += bytes) {
      std::uint16_t h = 0;
      std::memcpy(&h, src, 2);
      out[i] = type == dtype::f16 ? half_to_float(h) : bfloat16_to_float(h);
    }
  }

  /// fn(element offset, step, run, out) for each run of the last axis that [at, at + n) (C
  /// order) crosses, in order.
  template <class Fn>
  void walk(std::size_t at, std::size_t n, Fn&& fn, float* out) const noexcept {
    const std::size_t r = shape.size();
    const std::size_t inner = shape[r - 1];
    std::size_t row = at / inner;  // the row of the last axis, in C order
    std::size_t col = at % inner;
    while (n > 0) {
      std::ptrdiff_t offset = static_cast<std::ptrdiff_t>(col) * strides[r - 1];
      std::size_t rest = row;
      for (std::size_t a = r - 1; a-- > 0;) {
        offset += static_cast<std::ptrdiff_t>(rest % shape[a]) * strides[a];
        rest /= shape[a];
      }
      const std::size_t run = std::min(n, inner - col);
      fn(offset, strides[r - 1], run, out);
      out += run;
      n -= run;
      ++row;
      col = 0;
    }
  }
};

/// A float32 view of `n`-value memory in C order with `shape` (the common case: an engine's own
/// contiguous buffer).
[[nodiscard]] inline tensor_view view_of(const float* data, std::vector<std::size_t> shape,
                                         std::string name = "tensor") {
  tensor_view v;
  v.data = data;
  v.shape = std::move(shape);
  v.name = std::move(name);
  return v;
}

/// A float32 view of a contiguous row-major container with data() and shape() (an xtensor
/// container or adaptor, for example; no copy).
template <class C>
[[nodiscard]] tensor_view as_tensor_view(const C& c, std::string name = "tensor") {
  static_assert(std::is_same_v<std::decay_t<decltype(*c.data())>, float>,
                "as_tensor_view reads float32 containers; describe other types with tensor_view");
  return view_of(c.data(), std::vector<std::size_t>(c.shape().begin(), c.shape().end()),
                 std::move(name));
}

/// What keeps `v` from being read ("" when nothing does): one stride per axis (or none), data
/// wherever there are values, and a shape whose size and element offsets fit in memory's
/// address range.
[[nodiscard]] inline std::string tensor_view_problem(const tensor_view& v) {
  if (!v.strides.empty() && v.strides.size() != v.shape.size()) {
    return std::to_string(v.strides.size()) + " strides for a rank-" +
           std::to_string(v.shape.size()) + " shape (one per axis, or none for C order)";
  }
  constexpr auto limit = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
  std::size_t n = 1;
  std::size_t reach = 0;  // the largest |element offset| the strides reach
  for (std::size_t a = 0; a < v.shape.size(); ++a) {
    const std::size_t d = v.shape[a];
    if (d != 0 && n > limit / d)
      return "its shape holds more values than memory can";
    n *= d;
    if (!v.strides.empty() && d > 1) {
      const std::ptrdiff_t s = v.strides[a];
      const std::size_t step =
          s < 0 ? std::size_t(0) - static_cast<std::size_t>(s) : static_cast<std::size_t>(s);
      if (step != 0 && (d - 1 > limit / step || reach > limit - (d - 1) * step))
        return "its strides reach beyond memory's address range";
      reach += (d - 1) * step;
    }
  }
  if (n != 0 && v.data == nullptr)
    return "no data (null pointer) for " + std::to_string(n) + " values";
  return {};
}

/// tensor_view_problem as an error: E909, naming the view.
[[nodiscard]] inline result<> check_tensor_view(const tensor_view& v) {
  std::string problem = tensor_view_problem(v);
  if (problem.empty())
    return {};
  return make_error(errc::tensor_view_invalid, v.name + ": " + problem);
}

namespace detail {

/// The bytes a checked view reads: [first, last) from its data pointer.
inline void view_extent(const tensor_view& v, std::ptrdiff_t& first,
                        std::ptrdiff_t& last) noexcept {
  std::ptrdiff_t lo = 0;
  std::ptrdiff_t hi = 0;
  for (std::size_t a = 0; a < v.shape.size(); ++a) {
    const std::ptrdiff_t s =
        v.strides.empty() ? 0 : v.strides[a];  // C order: the size below covers it
    const std::ptrdiff_t far = static_cast<std::ptrdiff_t>(v.shape[a] - 1) * s;
    (far < 0 ? lo : hi) += far;
  }
  if (v.strides.empty())
    hi = static_cast<std::ptrdiff_t>(v.size()) - 1;
  const auto item = static_cast<std::ptrdiff_t>(v.item());
  first = lo * item;
  last = (hi + 1) * item;
}

}  // namespace detail

/// Whether `out`, a float32 buffer of v.size() values, may receive what is computed from `v`:
/// `v` can be read, `out` is there when values are, and it is either `v`'s own memory (float32
/// in C order: in place) or apart from every byte `v` reads. E909 names the view otherwise.
[[nodiscard]] inline result<> check_output_buffer(const tensor_view& v, const float* out) {
  if (auto st = check_tensor_view(v); !st)
    return st;
  const std::size_t n = v.size();
  if (n == 0 || out == v.in_place())
    return {};
  if (out == nullptr)
    return make_error(errc::tensor_view_invalid, v.name + ": no output buffer for its values");
  std::ptrdiff_t first = 0;
  std::ptrdiff_t last = 0;
  detail::view_extent(v, first, last);
  const auto begin = reinterpret_cast<std::uintptr_t>(v.data);
  const auto out_begin = reinterpret_cast<std::uintptr_t>(out);
  const std::uintptr_t out_end = out_begin + n * sizeof(float);
  const std::uintptr_t lo = begin + static_cast<std::uintptr_t>(first);  // modular: first <= 0
  const std::uintptr_t hi = begin + static_cast<std::uintptr_t>(last);
  if (out_begin < hi && lo < out_end) {
    return make_error(errc::tensor_view_invalid,
                      v.name + ": the output buffer overlaps the " +
                          std::string(to_string(v.type)) + (v.contiguous() ? "" : " strided") +
                          " values it is computed from; it may be their own memory only when "
                          "they are float32 in C order");
  }
  return {};
}

/// The values of a checked view as float32 in C order: where they lie when in_place(), else
/// converted into `scratch` (a weight's size; batches go through the threaded conversions of
/// algorithms/activations/view_blocks.hpp).
[[nodiscard]] inline const float* float_values(const tensor_view& v, std::vector<float>& scratch) {
  if (const float* p = v.in_place())
    return p;
  scratch.resize(v.size());
  v.convert(0, v.size(), scratch.data());
  return scratch.data();
}

/// The values of a checked view as float32 in C order, in a vector of their own.
[[nodiscard]] inline std::vector<float> copy_values(const tensor_view& v) {
  std::vector<float> out(v.size());
  v.convert(0, out.size(), out.data());
  return out;
}

/// Values per block when a view that is not float32 in place is converted on the way to a
/// kernel: 1 MiB of float32, small enough to stay in the cache between its conversion and use.
inline constexpr std::size_t conversion_block = std::size_t{1} << 18;

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
