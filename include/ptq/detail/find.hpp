// The one lookup by name (or key) that the plan, the record and their checks share: a linear
// scan, as the lists are a model's layers. Standard library only.
#pragma once

#include <vector>

#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

/// The first element of `items` whose `member` equals `key`, or nullptr.
template <class T, class M, class K>
[[nodiscard]] const T* find_by(const std::vector<T>& items, M T::*member, const K& key) noexcept {
  for (const auto& x : items) {
    if (x.*member == key)
      return &x;
  }
  return nullptr;
}

}  // namespace detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
