// The outputs of every `ptq` command, all or nothing: every output path is checked before any
// work (not an input, not another output, its folder exists and takes a new file, it is a
// regular file or a new path: never a folder, a device, a FIFO or a socket), so a typo does not
// throw away minutes of AdaRound; at the end every output is written to a temporary file beside
// its target and flushed, and only when all are written are they renamed into place, under an
// exclusive lock on their folders so two runs never leave a mix of their outputs. A failure
// removes the temporary files and any output already renamed; SIGINT / SIGTERM remove the
// temporary files (also the checks' probes) and the temporary folder of a no-argument run, then
// end the process with the signal. POSIX.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
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

// What the signal handler removes: a table of C strings made before the files exist and
// published through lock-free atomics, which the handler reads without allocating. One table
// at a time (a command commits once); `cleanup_scope` makes and retracts it.
inline std::atomic<const char* const*> cleanup_table{nullptr};
inline std::atomic<std::size_t> cleanup_size{0};
inline std::atomic<const char*> cleanup_dir{nullptr};
inline std::atomic<const char*> signal_prefix{"ptq"};

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
  const char* const* table = cleanup_table.load();
  const std::size_t n = table ? cleanup_size.load() : 0;
  for (std::size_t i = 0; i < n; ++i)
    ::unlink(table[i]);
  if (const char* dir = cleanup_dir.load())
    ::rmdir(dir);  // only when empty: outputs already in place stay
  write_stderr("\n");
  write_stderr(signal_prefix.load());
  write_stderr(sig == SIGINT ? ": error: interrupted (SIGINT); no output was written [E1103]\n"
                             : ": error: interrupted (SIGTERM); no output was written [E1103]\n");
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

static_assert(std::atomic<const char* const*>::is_always_lock_free &&
                  std::atomic<std::size_t>::is_always_lock_free,
              "the signal handler reads these");

/// The temporary files of one step (the output probes, or a commit) for the signal handler:
/// published when made, retracted when it ends, so no file outlives an interrupted run.
class cleanup_scope {
 public:
  explicit cleanup_scope(std::vector<std::string> paths) : paths_(std::move(paths)) {
    for (const auto& p : paths_)
      c_.push_back(p.c_str());
    cleanup_size.store(c_.size());
    cleanup_table.store(c_.data());
  }
  cleanup_scope(const cleanup_scope&) = delete;
  cleanup_scope& operator=(const cleanup_scope&) = delete;
  ~cleanup_scope() { retract(); }
  /// The files are the outputs now (renamed into place): nothing to remove any more.
  void retract() noexcept {
    cleanup_table.store(nullptr);
    cleanup_size.store(0);
  }
  [[nodiscard]] const std::vector<std::string>& paths() const noexcept { return paths_; }

 private:
  std::vector<std::string> paths_;
  std::vector<const char*> c_;
};

/// `<path>.tmp.<pid>`: the temporary file of an output (and of its probe).
[[nodiscard]] inline std::string temporary_of(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

/// What an existing path is, in words, when it is not a regular file or folder.
[[nodiscard]] inline const char* special_kind(mode_t m) noexcept {
  if (S_ISCHR(m))
    return "a character device";
  if (S_ISBLK(m))
    return "a block device";
  if (S_ISFIFO(m))
    return "a FIFO";
  if (S_ISSOCK(m))
    return "a socket";
  return S_ISREG(m) || S_ISDIR(m) ? nullptr : "not a regular file";
}

/// Exclusive advisory locks (flock) on the folders of a set of outputs, taken in one order:
/// two ptq runs writing the same outputs commit one after the other, so the files end as one
/// run's complete set, never a mix of both.
class folder_locks {
 public:
  explicit folder_locks(const std::vector<std::string>& targets) {
    std::vector<std::string> dirs;
    for (const auto& t : targets)
      dirs.push_back(canonical_text(parent_of(t)));
    std::sort(dirs.begin(), dirs.end());
    dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
    for (const auto& d : dirs) {
      const int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0)
        continue;  // the commit reports the folder's error itself
      while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
      }
      fds_.push_back(fd);
    }
  }
  folder_locks(const folder_locks&) = delete;
  folder_locks& operator=(const folder_locks&) = delete;
  ~folder_locks() {
    for (const int fd : fds_)
      ::close(fd);  // closing releases the lock
  }

 private:
  std::vector<int> fds_;
};

}  // namespace detail

/// Installs the SIGINT / SIGTERM cleanup for the command `prefix` ("ptq calibrate") names in
/// its message; every command that writes files calls it first thing (a string literal).
inline void install_interrupt_cleanup(const char* prefix) {
  detail::signal_prefix.store(prefix);
  std::signal(SIGINT, detail::on_signal);
  std::signal(SIGTERM, detail::on_signal);
}

/// A folder the signal handler removes if it is still empty (the no-argument run's outputs);
/// `dir` must live until the call with nullptr that ends it.
inline void cleanup_folder_on_signal(const std::string& dir) {
  detail::cleanup_dir.store(dir.c_str());
}
inline void cleanup_folder_on_signal(std::nullptr_t) {
  detail::cleanup_dir.store(nullptr);
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
  std::vector<std::string> probes;
  for (const auto& o : outputs)
    probes.push_back(detail::temporary_of(o.path));
  const detail::cleanup_scope cleanup(probes);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const auto& o = outputs[i];
    const std::string at = o.option + " '" + o.path + "': ";
    struct ::stat st {};
    if (::stat(o.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      return ptq::make_error(ptq::errc::output_not_writable,
                             at + "is a folder; give the file to write");
    }
    if (::stat(o.path.c_str(), &st) == 0 && detail::special_kind(st.st_mode) != nullptr) {
      return ptq::make_error(ptq::errc::output_not_writable,
                             at + "is " + detail::special_kind(st.st_mode) +
                                 ", which an output would replace; an output is a regular file "
                                 "or a new path");
    }
    const std::string dir = detail::parent_of(o.path);
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return ptq::make_error(ptq::errc::output_not_writable,
                             at + "the folder '" + dir + "' does not exist");
    }
    // Creating a file is the only test that holds for every case (permissions, a read-only
    // file system, root); the probe is removed at once (and by the signal handler).
    const std::string& probe = probes[i];
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

/// Writes every output to `<target>.tmp.<pid>`, then, holding the folders' locks
/// (folder_locks), checks the targets again and renames them all into place. On any failure no
/// output is left: the temporary files are removed, and so are the outputs already renamed (an
/// earlier file at such a path is then gone too; the checks of check_outputs, run again here, make
/// that a race with another process only).
[[nodiscard]] inline ptq::result<> commit_outputs(const std::vector<output_file>& outputs) {
  std::vector<std::string> targets;
  std::vector<std::string> tmps;
  for (const auto& o : outputs) {
    targets.push_back(o.target.path);
    tmps.push_back(detail::temporary_of(o.target.path));
  }
  detail::cleanup_scope cleanup(tmps);
  const auto remove_tmps = [&] {
    for (const auto& t : tmps)
      ::unlink(t.c_str());
  };
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (auto st = detail::write_flushed(tmps[i], outputs[i]); !st) {
      remove_tmps();
      return st;
    }
  }
  const detail::folder_locks locks(targets);  // another run's renames end before ours start
  for (const auto& o : outputs) {
    const auto& t = o.target;
    struct ::stat st {};
    const char* kind =
        ::stat(t.path.c_str(), &st) == 0 ? detail::special_kind(st.st_mode) : nullptr;
    if (kind != nullptr || (::stat(t.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))) {
      remove_tmps();
      return ptq::make_error(ptq::errc::output_not_writable,
                             t.option + " '" + t.path + "': is " +
                                 (kind != nullptr ? kind : "a folder") + "; no output was written");
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
  cleanup.retract();
  return {};
}

}  // namespace ptq_cli
