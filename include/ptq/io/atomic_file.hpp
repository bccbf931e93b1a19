// Atomic file writes: a temporary file in the same folder, flushed to disk, then renamed over
// the target, so an interrupted run never leaves a truncated record, config or tensor file.
// POSIX; standard library otherwise.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <unistd.h>

#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace io {

/// Writes `contents` to `path` atomically. On failure returns false, says why in `error`, and
/// leaves any existing file at `path` untouched.
[[nodiscard]] inline bool write_file_atomic(const std::string& path, std::string_view contents,
                                            std::string& error) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = "cannot create '" + tmp + "': " + std::strerror(errno);
    return false;
  }
  const char* p = contents.data();
  std::size_t left = contents.size();
  while (left > 0) {
    const ::ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      error = "cannot write '" + tmp + "': " + std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    error = "cannot flush '" + tmp + "': " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace io
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
