// Bounded file reading, the one way every ptq reader gets its bytes (config text, layer lists,
// JSON configs, records, manifests, .npy, safetensors). A directory, a FIFO, a device such as
// /dev/zero or any other non-regular file is refused by name before it is opened for reading
// (opening a FIFO would block, reading /dev/zero would never end); a file above the caller's
// limit is refused before a byte is read, and reading stops at the limit even if the file grows
// meanwhile. Standard library plus POSIX stat/open/read.
// Depends on: core.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ptq/core/error.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Default limit for text inputs (configs, layer lists, JSON configs, records, manifests): the
/// config lexer's input limit (`text_limits::max_input_bytes`, E105), 16 MiB.
inline constexpr std::uint64_t default_text_file_limit = std::uint64_t{16} << 20;

/// Default limit for tensor files read into memory (try_read_npy): 4 GiB. Callers can pass a larger
/// one.
inline constexpr std::uint64_t default_tensor_file_limit = std::uint64_t{4} << 30;

/// Default limit for tensor files that are mapped, never read whole (try_map_npy, safetensors):
/// 256 GiB, for the weights of large models.
inline constexpr std::uint64_t default_mapped_file_limit = std::uint64_t{256} << 30;

namespace detail {

/// "16 MiB", "4 GiB" or "123 bytes": the limit as a reader would write it.
[[nodiscard]] inline std::string byte_count(std::uint64_t n) {
  if (n >= (std::uint64_t{1} << 30) && n % (std::uint64_t{1} << 30) == 0)
    return std::to_string(n >> 30) + " GiB";
  if (n >= (std::uint64_t{1} << 20) && n % (std::uint64_t{1} << 20) == 0)
    return std::to_string(n >> 20) + " MiB";
  if (n >= (std::uint64_t{1} << 10) && n % (std::uint64_t{1} << 10) == 0)
    return std::to_string(n >> 10) + " KiB";
  return std::to_string(n) + (n == 1 ? " byte" : " bytes");
}

/// What a non-regular file is, for the message.
[[nodiscard]] inline const char* file_kind(mode_t mode) noexcept {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

[[nodiscard]] inline error not_regular(const std::string& path, mode_t mode) {
  return make_error(errc::not_a_file,
                    "'" + path + "' is " + file_kind(mode) + "; a regular file is needed");
}

[[nodiscard]] inline error too_large(const std::string& path, std::uint64_t size,
                                     std::uint64_t max_bytes) {
  return make_error(errc::file_too_large, "'" + path + "' is " + std::to_string(size) +
                                              " bytes; the limit is " + byte_count(max_bytes));
}

/// A read-only descriptor of a regular file, closed with its owner, and the file's size.
class open_file {
 public:
  open_file(int fd, std::uint64_t size) noexcept : fd_(fd), size_(size) {}
  open_file(open_file&& o) noexcept : fd_(o.fd_), size_(o.size_) { o.fd_ = -1; }
  open_file(const open_file&) = delete;
  open_file& operator=(const open_file&) = delete;
  open_file& operator=(open_file&&) = delete;
  ~open_file() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  /// The descriptor, no longer closed by this object.
  [[nodiscard]] int release() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
  std::uint64_t size_;
};

/// Opens the regular file at `path` of at most `max_bytes`, the checks try_read_file and
/// try_map_file share: a missing file, a directory, device, FIFO or socket, and the size, before
/// and after the open (the path may change between them).
[[nodiscard]] inline result<open_file> open_regular_file(const std::string& path,
                                                         std::uint64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return make_error(errc::file_open_failed,
                      "cannot open '" + path + "': " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode))
    return not_regular(path, st.st_mode);
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    return too_large(path, static_cast<std::uint64_t>(st.st_size), max_bytes);
  // O_NONBLOCK: should the path become a FIFO between stat and open, open must not block;
  // fstat then checks what was actually opened.
  open_file f(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK), 0);
  if (f.fd() < 0) {
    return make_error(errc::file_open_failed,
                      "cannot open '" + path + "': " + std::strerror(errno));
  }
  if (::fstat(f.fd(), &st) != 0) {
    return make_error(errc::read_failed, "cannot read '" + path + "': " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode))
    return not_regular(path, st.st_mode);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes)
    return too_large(path, size, max_bytes);
  return open_file(f.release(), size);
}

}  // namespace detail

/// The whole contents of the regular file at `path`, at most `max_bytes` long. Errors:
/// errc::file_open_failed (missing, no permission), errc::not_a_file ("'x' is a directory"),
/// errc::file_too_large (with the limit), errc::read_failed. An empty file is an empty string.
[[nodiscard]] inline result<std::string> try_read_file(const std::string& path,
                                                       std::uint64_t max_bytes) {
  auto file = detail::open_regular_file(path, max_bytes);
  if (!file)
    return file.error();
  const int fd = file->fd();
  const std::uint64_t size = file->size();
  std::string out;
  out.resize(static_cast<std::size_t>(size));
  std::uint64_t have = 0;
  // Reads until end of file; a file that grew since fstat is read on, but never past the limit.
  for (;;) {
    if (have == out.size()) {
      if (have > max_bytes)
        return detail::too_large(path, have, max_bytes);
      // Grow by up to 64 KiB, but by one byte more than the limit leaves at most: reading that
      // byte tells "above the limit".
      const std::uint64_t left = max_bytes - have;
      out.resize(static_cast<std::size_t>(have + (left < 65535 ? left + 1 : 65536)));
    }
    const ::ssize_t n = ::read(fd, &out[static_cast<std::size_t>(have)],
                               static_cast<std::size_t>(out.size() - have));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return make_error(errc::read_failed, "cannot read '" + path + "': " + std::strerror(errno));
    if (n == 0)
      break;
    have += static_cast<std::uint64_t>(n);
  }
  if (have > max_bytes)
    return detail::too_large(path, have, max_bytes);
  out.resize(static_cast<std::size_t>(have));
  return out;
}

#if PTQ_EXCEPTIONS
/// try_read_file, throwing ptq::exception on an error.
[[nodiscard]] inline std::string read_file(const std::string& path, std::uint64_t max_bytes) {
  return value_or_throw(try_read_file(path, max_bytes));
}
#endif

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
