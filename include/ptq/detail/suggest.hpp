// "Did you mean ...?" for a misspelt name: the project's one edit distance. Standard library
// only.
// Depends on: core.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

/// Levenshtein distance (insertions, deletions, substitutions), one row of memory; the name
/// lists it serves are short.
[[nodiscard]] inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0U : 1U)});
      diag = up;
    }
  }
  return row[b.size()];
}

/// The name of `names` closest to `wrong`, or empty when none is close enough to be a likely
/// typo (at most 2 edits, or a third of the length of a long name). The first of equals wins.
[[nodiscard]] inline std::string_view closest_name(std::string_view wrong,
                                                   const std::vector<std::string_view>& names) {
  std::string_view best;
  std::size_t best_d = ~std::size_t{0};
  for (const auto n : names) {
    const auto d = edit_distance(wrong, n);
    if (d < best_d) {
      best_d = d;
      best = n;
    }
  }
  if (best.empty() || best_d > std::max<std::size_t>(2, wrong.size() / 3))
    return {};
  return best;
}

/// "did you mean 'x'?" for a close name, else empty.
[[nodiscard]] inline std::string did_you_mean(std::string_view wrong,
                                              const std::vector<std::string_view>& names) {
  const auto best = closest_name(wrong, names);
  return best.empty() ? std::string() : "did you mean '" + std::string(best) + "'?";
}

/// "did you mean 'x'?" for a close name, else the list of valid names (for short, fixed lists
/// such as a message's fields).
[[nodiscard]] inline std::string suggest(std::string_view wrong,
                                         const std::vector<std::string_view>& names) {
  auto note = did_you_mean(wrong, names);
  if (!note.empty())
    return note;
  std::string all = "valid names: ";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i != 0u)
      all += ", ";
    all += names[i];
  }
  return all;
}

}  // namespace detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
