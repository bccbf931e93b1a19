// Shared by the reader fuzzers: a failed result must carry an error, a successful one none, and
// every diagnostic must render. A violation traps, so libFuzzer reports it as a crash.
#pragma once

#include <string>
#include <string_view>

#include "ptq/core/error.hpp"

namespace ptq_fuzz {

[[noreturn]] inline void invariant_failed() {
  __builtin_trap();
}

template <class T>
void check_result(const ptq::result<T>& r) {
  bool has_error = false;
  for (const auto& d : r.diagnostics()) {
    has_error = has_error || ptq::is_error(d);
    if (d.message.empty() || ptq::format_error(d, "fuzz").empty())
      invariant_failed();
  }
  if (r.ok() == has_error)
    invariant_failed();
}

}  // namespace ptq_fuzz
