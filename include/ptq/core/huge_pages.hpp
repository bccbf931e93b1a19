// A hint that a large, freshly reserved buffer be backed by transparent huge pages, so filling
// it takes one page fault per 2 MiB instead of one per 4 KiB (Linux with THP in "madvise" mode,
// the Debian default; elsewhere a no-op). The buffer's contents and the results do not change.
// Depends on: the standard library.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

/// Advises huge pages for the whole 2 MiB pages inside [p, p + bytes); ignores failures.
inline void advise_huge_pages(const void* p, std::size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t huge = std::uintptr_t{2} << 20;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t begin = (at + huge - 1) & ~(huge - 1);
  const std::uintptr_t end = (at + bytes) & ~(huge - 1);
  if (end > begin) {  // the page-aligned address as an offset from p: no integer-to-pointer cast
    void* first = const_cast<char*>(static_cast<const char*>(p)) + (begin - at);
    (void)::madvise(first, end - begin, MADV_HUGEPAGE);
  }
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
