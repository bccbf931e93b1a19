// The outputs of `ptq calibrate`, all or nothing: every output path is checked before any work
// (not an input, not another output, its folder exists and takes a new file, it is not a
// folder), so a typo does not throw away minutes of AdaRound; at the end every output is
// written to a temporary file beside its target and flushed, and only when all are written are
// they renamed into place. A failure removes the temporary files and any output already renamed;
// SIGINT / SIGTERM remove the temporary files and the temporary folder of a no-argument run, then
// end the process with the signal. POSIX.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ptq/core/error.hpp"
#include "ptq/io/atomic_file.hpp"

namespace ptq_cli {

/// A file the command reads or writes, with the option that named it ("--record", "CONFIG").
struct named_path {
  std::string option;
  std::string path;
};

namespace detail {

/// The path with `.`, `..` and symlinks resolved as far as it exists (the rest appended).
[[nodiscard]] inline std::string canonical_text(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  return ec ? path : p.string();
}

/// Whether two paths name the same file: the same canonical path, or the same inode (a hard
/// link) when both exist.
[[nodiscard]] inline bool same_file(const std::string& a, const std::string& b) {
  if (canonical_text(a) == canonical_text(b))
    return true;
  struct ::stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

[[nodiscard]] inline std::string parent_of(const std::string& path) {
  const auto parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// What the signal handler removes: fixed buffers it can read without allocating. A slot is
// written before `cleanup_count` makes it visible.
inline constexpr std::size_t max_cleanup = 16;
inline constexpr std::size_t max_cleanup_path = 4096;
inline char cleanup_paths[max_cleanup][max_cleanup_path];
inline volatile std::sig_atomic_t cleanup_count = 0;
inline char cleanup_dir[max_cleanup_path];
inline volatile std::sig_atomic_t cleanup_has_dir = 0;

inline void write_stderr(const char* s) noexcept {
  std::size_t n = std::strlen(s);
  while (n > 0) {
    const ::ssize_t w = ::write(2, s, n);
    if (w <= 0)
      return;
    s += w;
    n -= static_cast<std::size_t>(w);
  }
}

// Async-signal-safe: unlink, rmdir, write, signal and raise only.
inline void on_signal(int sig) noexcept {
  for (std::sig_atomic_t i = 0; i < cleanup_count; ++i)
    ::unlink(cleanup_paths[i]);
  if (cleanup_has_dir)
    ::rmdir(cleanup_dir);  // only when empty: outputs already in place stay
  write_stderr(sig == SIGINT ? "\nptq calibrate: error: interrupted (SIGINT); no output was "
                               "written [E1103]\n"
                             : "\nptq calibrate: error: interrupted (SIGTERM); no output was "
                               "written [E1103]\n");
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace detail

/// Installs the SIGINT / SIGTERM cleanup; call once before the outputs are staged.
inline void install_interrupt_cleanup() {
  std::signal(SIGINT, detail::on_signal);
  std::signal(SIGTERM, detail::on_signal);
}

/// A folder the signal handler removes if it is still empty (the no-argument run's outputs).
inline void cleanup_folder_on_signal(const std::string& dir) {
  if (dir.size() >= detail::max_cleanup_path)
    return;
  std::memcpy(detail::cleanup_dir, dir.c_str(), dir.size() + 1);
  detail::cleanup_has_dir = 1;
}

/// Checks the outputs against the inputs and each other, and that each can be created, before
/// any work. Errors: output_conflict, output_not_writable.
[[nodiscard]] inline ptq::result<> check_outputs(const std::vector<named_path>& outputs,
                                                 const std::vector<named_path>& inputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const auto& o = outputs[i];
    for (const auto& in : inputs) {
      if (detail::same_file(o.path, in.path)) {
        return ptq::make_error(ptq::errc::output_conflict,
                               o.option + " '" + o.path + "' is the same file as " + in.option +
                                   " '" + in.path + "'; an output must not overwrite an input");
      }
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (detail::same_file(o.path, outputs[j].path)) {
        return ptq::make_error(ptq::errc::output_conflict, outputs[j].option + " and " + o.option +
                                                               " are the same file '" + o.path +
                                                               "'; give each output its own file");
      }
    }
  }
  for (const auto& o : outputs) {
    const std::string at = o.option + " '" + o.path + "': ";
    struct ::stat st {};
    if (::stat(o.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      return ptq::make_error(ptq::errc::output_not_writable,
                             at + "is a folder; give the file to write");
    }
    const std::string dir = detail::parent_of(o.path);
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return ptq::make_error(ptq::errc::output_not_writable,
                             at + "the folder '" + dir + "' does not exist");
    }
    // Creating a file is the only test that holds for every case (permissions, a read-only
    // file system, root); the probe is removed at once.
    const std::string probe = o.path + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      return ptq::make_error(ptq::errc::output_not_writable,
                             at + "cannot create a file in '" + dir + "': " + std::strerror(errno));
    }
    ::close(fd);
    ::unlink(probe.c_str());
  }
  return {};
}

/// An output's target and contents. A large output (the fake-quantized weights) is written
/// from its tensors: `contents` holds its header, `data` views of the values that `keep` owns,
/// written after it without being joined into one buffer. An output that serializes itself
/// (an ONNX model) gives `write`, which writes it into the file descriptor from what `keep`
/// owns and returns false (errno set) on failure.
struct output_file {
  output_file(named_path t, std::string c) : target(std::move(t)), contents(std::move(c)) {}
  output_file(named_path t, std::string header, std::vector<std::string_view> views,
              std::shared_ptr<const void> owner)
      : target(std::move(t)),
        contents(std::move(header)),
        data(std::move(views)),
        keep(std::move(owner)) {}
  output_file(named_path t, std::function<bool(int)> writer, std::shared_ptr<const void> owner)
      : target(std::move(t)), keep(std::move(owner)), write(std::move(writer)) {}

  named_path target;
  std::string contents;
  std::vector<std::string_view> data;
  std::shared_ptr<const void> keep;
  std::function<bool(int)> write;
};

namespace detail {

[[nodiscard]] inline ptq::result<> write_flushed(const std::string& path, const output_file& o) {
  const auto fail = [&](const char* what) {
    return ptq::make_error(ptq::errc::write_failed,
                           std::string(what) + " '" + path + "': " + std::strerror(errno));
  };
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return fail("cannot create");
  errno = 0;
  bool written = ptq::io::detail::write_all(fd, o.contents);
  for (std::size_t i = 0; written && i < o.data.size(); ++i)
    written = ptq::io::detail::write_all(fd, o.data[i]);
  if (written && o.write)
    written = o.write(fd);
  if (!written) {
    if (errno == 0)
      errno = EIO;
    auto e = fail("cannot write");
    ::close(fd);
    return e;
  }
  if (::fsync(fd) != 0) {
    auto e = fail("cannot flush");
    ::close(fd);
    return e;
  }
  if (::close(fd) != 0)
    return fail("cannot flush");
  return {};
}

}  // namespace detail

/// Writes every output to `<target>.tmp.<pid>`, then renames them all into place. On any
/// failure no output is left: the temporary files are removed, and so are the outputs already
/// renamed (an earlier file at such a path is then gone too; the checks of check_outputs, run
/// again here, make that a race with another process only).
[[nodiscard]] inline ptq::result<> commit_outputs(const std::vector<output_file>& outputs) {
  std::vector<std::string> tmps;
  const auto remove_tmps = [&] {
    for (const auto& t : tmps)
      ::unlink(t.c_str());
    detail::cleanup_count = 0;
  };
  for (const auto& o : outputs) {
    const std::string tmp = o.target.path + ".tmp." + std::to_string(::getpid());
    if (tmp.size() < detail::max_cleanup_path &&
        static_cast<std::size_t>(detail::cleanup_count) < detail::max_cleanup) {
      const auto slot = static_cast<std::size_t>(detail::cleanup_count);
      std::memcpy(detail::cleanup_paths[slot], tmp.c_str(), tmp.size() + 1);
      detail::cleanup_count = detail::cleanup_count + 1;
    }
    tmps.push_back(tmp);
    if (auto st = detail::write_flushed(tmp, o); !st) {
      remove_tmps();
      return st;
    }
  }
  std::vector<named_path> targets;
  for (const auto& o : outputs)
    targets.push_back(o.target);
  for (const auto& t : targets) {
    struct ::stat st {};
    if (::stat(t.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      remove_tmps();
      return ptq::make_error(ptq::errc::output_not_writable,
                             t.option + " '" + t.path + "': is a folder; no output was written");
    }
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (std::rename(tmps[i].c_str(), outputs[i].target.path.c_str()) != 0) {
      auto e = ptq::make_error(ptq::errc::write_failed,
                               "cannot rename '" + tmps[i] + "' to '" + outputs[i].target.path +
                                   "': " + std::strerror(errno) + "; no output was written");
      for (std::size_t j = 0; j < i; ++j)
        ::unlink(outputs[j].target.path.c_str());
      remove_tmps();
      return e;
    }
  }
  detail::cleanup_count = 0;
  return {};
}

}  // namespace ptq_cli
