// Values as a file stores them: float32 (possibly at an offset that is not a multiple of 4) or
// binary16, read where they lie (a mapped file) and converted to float32 a block at a time by
// whoever consumes them, so a float16 input never needs a float32 copy of its own. Also the one
// binary16 -> float32 conversion (.npy, safetensors).
// Depends on: the standard library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ptq/core/abi.hpp"

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

/// How stored values are encoded (little-endian, as .npy '<f4'/'<f2' and safetensors store them).
enum class stored_type : std::uint8_t { f32, f16 };

/// `count` values of `type` at `bytes`, owned by someone else (usually a mapped file).
struct stored_values {
  const char* bytes = nullptr;
  std::size_t count = 0;
  stored_type type = stored_type::f32;

  [[nodiscard]] std::size_t size() const noexcept { return count; }
  /// Bytes per value.
  [[nodiscard]] std::size_t item() const noexcept { return type == stored_type::f32 ? 4 : 2; }
  /// The values themselves when they are float32 at an address a float may have, else nullptr
  /// (then they are read through convert()).
  [[nodiscard]] const float* in_place() const noexcept {
    if (type != stored_type::f32 || count == 0 ||
        reinterpret_cast<std::uintptr_t>(bytes) % alignof(float) != 0)
      return nullptr;
    // Mapped memory has no declared type; the address is aligned for float (checked above).
    return reinterpret_cast<const float*>(bytes);
  }
  /// Values [at, at + n) as float32 into out[0, n). Requires at + n <= count.
  void convert(std::size_t at, std::size_t n, float* out) const noexcept {
    const char* src = bytes + at * item();
    if (type == stored_type::f32) {
      if (n != 0u)
        std::memcpy(out, src, n * 4);
      return;
    }
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t h = 0;
      std::memcpy(&h, src + 2 * i, 2);
      out[i] = half_to_float(h);
    }
  }
  /// Value i as float32.
  [[nodiscard]] float at(std::size_t i) const noexcept {
    float v = 0.0F;
    convert(i, 1, &v);
    return v;
  }
};

/// Values per block when stored values are converted on the way to a kernel: 1 MiB of float32,
/// small enough to stay in the cache between its conversion and its use.
inline constexpr std::size_t conversion_block = std::size_t{1} << 18;

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
