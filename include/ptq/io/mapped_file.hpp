// A file's bytes without a copy: read-only `mmap` of a regular file, with the checks of
// try_read_file (missing file, directory, FIFO or device, size limit) before anything is mapped.
//
// Why: the tensor readers used to read a file into a string (the kernel zero-fills then copies
// every page) and copy the string again into a float vector, three passes over memory and twice
// the file in RAM before a kernel saw a value. Mapped, the page cache *is* the buffer: the
// kernels read the float32 data in place.
//
// When `mmap` is refused (a filesystem without it) the bytes are read into an owned buffer
// instead (try_read_file), so every regular file still works. An empty file is an empty view.
// A mapped file must not be truncated by another process while it is in use (reading a page past
// the new end raises SIGBUS, as with every mmap reader); files being written should be written
// atomically (to a temporary, then renamed), as ptq's own writers do.
// POSIX mmap; the file is opened and checked by read_file.hpp's open_regular_file.
// Depends on: core.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <sys/mman.h>
#include <unistd.h>

#include "ptq/core/error.hpp"
#include "ptq/io/read_file.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// The bytes of a file, mapped read-only or (fallback) owned. Move-only.
class mapped_file {
 public:
  mapped_file() noexcept = default;
  /// Owned bytes (the read fallback, or bytes already in memory).
  explicit mapped_file(std::string owned) noexcept : owned_(std::move(owned)) {}
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  mapped_file(mapped_file&& other) noexcept { *this = std::move(other); }
  mapped_file& operator=(mapped_file&& other) noexcept {
    if (this != &other) {
      unmap();
      map_ = std::exchange(other.map_, nullptr);
      map_size_ = std::exchange(other.map_size_, 0);
      owned_ = std::move(other.owned_);
      other.owned_.clear();
    }
    return *this;
  }
  ~mapped_file() { unmap(); }

  [[nodiscard]] std::string_view bytes() const noexcept {
    if (map_ != nullptr)
      return {static_cast<const char*>(map_), map_size_};
    return owned_;
  }
  [[nodiscard]] std::size_t size() const noexcept { return bytes().size(); }
  /// True when the bytes are the page cache's, not a copy.
  [[nodiscard]] bool is_mapped() const noexcept { return map_ != nullptr; }

 private:
  friend result<mapped_file> try_map_file(const std::string& path, std::uint64_t max_bytes);

  void unmap() noexcept {
    if (map_ != nullptr)
      ::munmap(map_, map_size_);
    map_ = nullptr;
    map_size_ = 0;
  }

  void* map_ = nullptr;
  std::size_t map_size_ = 0;
  std::string owned_;
};

/// Maps the regular file at `path` (at most `max_bytes`) read-only. Same errors as try_read_file:
/// errc::file_open_failed, errc::not_a_file, errc::file_too_large, errc::read_failed.
[[nodiscard]] inline result<mapped_file> try_map_file(const std::string& path,
                                                      std::uint64_t max_bytes) {
  auto file = detail::open_regular_file(path, max_bytes);
  if (!file)
    return file.error();
  const int fd = file->fd();
  const std::uint64_t size = file->size();
  if (size == 0)
    return mapped_file{};
  // MAP_POPULATE faults the pages in up front, in one call, instead of one fault per 4 KiB page
  // when the kernels first touch them.
  void* p =
      ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    auto bytes = try_read_file(path, max_bytes);
    if (!bytes)
      return bytes.error();
    return mapped_file{std::move(bytes).value()};
  }
  mapped_file out;
  out.map_ = p;
  out.map_size_ = static_cast<std::size_t>(size);
  return out;
}

#if PTQ_EXCEPTIONS
/// try_map_file, throwing ptq::exception on an error.
[[nodiscard]] inline mapped_file map_file(const std::string& path, std::uint64_t max_bytes) {
  return value_or_throw(try_map_file(path, max_bytes));
}
#endif

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
