// Atomic file writes: a temporary file in the same folder, flushed to disk, then renamed over
// the target, so an interrupted run never leaves a truncated record, config or tensor file. A
// file can be written in pieces (a header, then tensor data where it lies), or by a writer that
// streams into it, without a joined copy.
// POSIX; standard library otherwise.
// Depends on: core.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "ptq/core/error.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace io {

namespace detail {

/// Writes all of `data` to `fd` (retrying short writes and EINTR); false with errno set on a
/// failure.
[[nodiscard]] inline bool write_all(int fd, std::string_view data) noexcept {
  const char* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    const ::ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = EIO;
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace detail

/// Writes `path` atomically with `write(fd)`, which writes the whole contents to the open
/// temporary file and returns false, errno set, when it cannot (a serializer that streams into
/// the file, say, instead of into a buffer first). On failure returns errc::write_failed naming
/// the file and the system's reason, removes the temporary file and leaves any existing file at
/// `path` untouched.
template <class Writer>
[[nodiscard]] result<> write_file_atomic_with(const std::string& path, Writer&& write) {
  // errno is read before close/unlink can change it.
  const auto fail = [](const std::string& what, const std::string& file) {
    return make_error(errc::write_failed, what + " '" + file + "': " + std::strerror(errno));
  };
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return fail("cannot create", tmp);
  errno = 0;
  if (!write(fd)) {
    if (errno == 0)
      errno = EIO;
    auto e = fail("cannot write", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return e;
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

/// Writes `pieces`, in order, to `path` atomically: a large output is written from where its
/// values are (a header, then each tensor's data) instead of being joined into one buffer first.
/// Errors as write_file_atomic_with.
[[nodiscard]] inline result<> write_file_atomic(const std::string& path,
                                                const std::vector<std::string_view>& pieces) {
  return write_file_atomic_with(path, [&](int fd) {
    for (const std::string_view piece : pieces) {
      if (!detail::write_all(fd, piece))
        return false;
    }
    return true;
  });
}

/// write_file_atomic of one piece.
[[nodiscard]] inline result<> write_file_atomic(const std::string& path,
                                                std::string_view contents) {
  return write_file_atomic(path, std::vector<std::string_view>{contents});
}

}  // namespace io
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
