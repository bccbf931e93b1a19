// A field read from protobuf text and where it was written: `setting<T>` for an optional scalar
// (unset is kept apart from set), `located<T>` for an element of a repeated field. Equality
// compares values only, never positions.
// Depends on: core.
#pragma once

#include <optional>
#include <utility>

#include "ptq/core/abi.hpp"
#include "ptq/prototext/diagnostics.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// An optional scalar field and where it was last set.
template <class T>
struct setting {
  std::optional<T> value;
  source_region where;

  [[nodiscard]] bool has_value() const noexcept { return value.has_value(); }
  [[nodiscard]] const T& operator*() const noexcept { return *value; }
  [[nodiscard]] T value_or(T fallback) const { return value ? *value : fallback; }
  void set(T v, source_region at = {}) {
    value = std::move(v);
    where = at;
  }
  friend bool operator==(const setting& a, const setting& b) { return a.value == b.value; }
  friend bool operator!=(const setting& a, const setting& b) { return !(a == b); }
};

/// An element of a repeated field and where it was written.
template <class T>
struct located {
  T value;
  source_region where;
  friend bool operator==(const located& a, const located& b) { return a.value == b.value; }
  friend bool operator!=(const located& a, const located& b) { return !(a == b); }
};

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
