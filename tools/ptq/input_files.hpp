// The tool's file reading: every input is checked to be a regular file below a size limit before
// anything reads it, so `ptq check DIR` or `ptq check /dev/zero` is a clear error naming the
// path, not a config with all defaults or a read that grows without bound.
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "ptq/core/error.hpp"
#include "ptq/io/safetensors.hpp"

namespace ptq_cli {

/// Limits of what the tool reads: a config, manifest or layer list is a few kilobytes; a
/// tensor file holds a model's weights or a calibration batch.
inline constexpr std::uint64_t max_text_bytes = std::uint64_t{16} << 20;    // 16 MiB
inline constexpr std::uint64_t max_tensor_bytes = std::uint64_t{16} << 30;  // 16 GiB

/// "16 MiB" / "16 GiB": the limit as the messages state it.
[[nodiscard]] inline std::string size_text(std::uint64_t bytes) {
  if (bytes >= (std::uint64_t{1} << 30) && bytes % (std::uint64_t{1} << 30) == 0)
    return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (std::uint64_t{1} << 20) && bytes % (std::uint64_t{1} << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

/// Checks that `path` can be read as a file: it exists, is not a folder, and, when it is a
/// regular file, has at most `limit` bytes. A device or pipe passes (its size is unknown); the
/// bounded reads below stop it at the limit. `what` says which input it is ("CONFIG",
/// "--weights") so the message names both.
[[nodiscard]] inline ptq::result<> check_input_file(const std::string& path, const char* what,
                                                    std::uint64_t limit) {
  struct ::stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return ptq::make_error(ptq::errc::file_open_failed, std::string(what) + ": cannot open '" +
                                                            path + "': " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) {
    return ptq::make_error(ptq::errc::not_a_file,
                           std::string(what) + ": '" + path + "' is a directory, not a file");
  }
  if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > limit) {
    return ptq::make_error(ptq::errc::file_too_large,
                           std::string(what) + ": '" + path + "' is " +
                               std::to_string(static_cast<std::uint64_t>(st.st_size)) +
                               " bytes; the limit is " + size_text(limit));
  }
  return {};
}

/// A checked text input (config, manifest, layer list), read up to max_text_bytes: more is an
/// error (so /dev/zero or a pipe that never ends is refused after 16 MiB, not read forever).
[[nodiscard]] inline ptq::result<std::string> read_text_input(const std::string& path,
                                                              const char* what) {
  if (auto st = check_input_file(path, what, max_text_bytes); !st)
    return st.error();
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return ptq::make_error(ptq::errc::file_open_failed, std::string(what) + ": cannot open '" +
                                                            path + "': " + std::strerror(errno));
  }
  std::string text;
  char buf[65536];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    if (text.size() + n > max_text_bytes) {
      std::fclose(f);
      return ptq::make_error(ptq::errc::file_too_large, std::string(what) + ": '" + path +
                                                            "' is larger than the limit of " +
                                                            size_text(max_text_bytes));
    }
    text.append(buf, n);
  }
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) {
    return ptq::make_error(ptq::errc::read_failed,
                           std::string(what) + ": cannot read '" + path + "'");
  }
  return text;
}

/// check_input_file for a tensor file (.npy, safetensors), which must also be a regular file:
/// the tensor readers read a whole file, so a device or pipe would have no bound.
[[nodiscard]] inline ptq::result<> check_tensor_file(const std::string& path, const char* what) {
  if (auto st = check_input_file(path, what, max_tensor_bytes); !st)
    return st;
  struct ::stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return ptq::make_error(ptq::errc::not_a_file, std::string(what) + ": '" + path +
                                                      "' is not a regular file (a device or pipe)");
  }
  return {};
}

/// A checked safetensors input.
[[nodiscard]] inline ptq::result<ptq::io::safetensors_file> read_tensor_input(
    const std::string& path, const char* what) {
  if (auto st = check_tensor_file(path, what); !st)
    return st.error();
  return ptq::io::read_safetensors(path);
}

}  // namespace ptq_cli
