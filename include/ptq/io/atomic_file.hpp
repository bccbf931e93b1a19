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

#include "ptq/core/error.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace io {

/// Writes `contents` to `path` atomically. On failure returns errc::write_failed naming the
/// file and the system's reason, removes the temporary file and leaves any existing file at
/// `path` untouched.
[[nodiscard]] inline result<> write_file_atomic(const std::string& path,
                                                std::string_view contents) {
  // errno is read before close/unlink can change it.
  const auto fail = [](const std::string& what, const std::string& file) {
    return make_error(errc::write_failed, what + " '" + file + "': " + std::strerror(errno));
  };
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return fail("cannot create", tmp);
  const char* p = contents.data();
  std::size_t left = contents.size();
  while (left > 0) {
    const ::ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      auto e = fail("cannot write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return e;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    auto e = fail("cannot flush", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return e;
  }
  if (::close(fd) != 0) {
    auto e = fail("cannot flush", tmp);
    ::unlink(tmp.c_str());
    return e;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    auto e = fail("cannot rename '" + tmp + "' to", path);
    ::unlink(tmp.c_str());
    return e;
  }
  return {};
}

}  // namespace io
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
