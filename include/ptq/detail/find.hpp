// The lookups by name (or key) that the plan, the record and their checks share: find_by, a
// linear scan for one lookup, and name_index, built once in linear time for lookups in a loop
// over a model's layers (a loop of find_by would be quadratic in them).
// Depends on: core.
#pragma once

#include <string_view>
#include <unordered_map>
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

/// `items` indexed by a string member: the first element of each name (as find_by finds it),
/// each lookup O(1). Holds pointers into `items`, which must outlive it unchanged.
template <class T>
class name_index {
 public:
  template <class M>
  name_index(const std::vector<T>& items, M T::*member) {
    map_.reserve(items.size());
    for (const auto& x : items)
      map_.emplace(std::string_view(x.*member), &x);
  }
  [[nodiscard]] const T* find(std::string_view key) const {
    const auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second;
  }

 private:
  std::unordered_map<std::string_view, const T*> map_;
};

}  // namespace detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
