// The tool's file inputs: every input is checked to be a regular file below a size limit before
// any work starts (so `ptq calibrate` refuses a bad --batches file before minutes of AdaRound),
// and read through the library's bounded `ptq::try_read_file`. Messages say which input it is
// ("CONFIG", "--weights") before the library's own words.
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "ptq/core/error.hpp"
#include "ptq/io/read_file.hpp"
#include "ptq/io/safetensors.hpp"

namespace ptq_cli {

/// Limits of what the tool reads: a config, manifest or layer list is a few kilobytes (the
/// config lexer's own input limit); a tensor file holds a model's weights or a batch.
inline constexpr std::uint64_t max_text_bytes = ptq::default_text_file_limit;      // 16 MiB
inline constexpr std::uint64_t max_tensor_bytes = ptq::default_mapped_file_limit;  // 256 GiB

/// `e` with "WHAT: " before its message.
[[nodiscard]] inline ptq::error for_input(ptq::error e, const char* what) {
  e.message = std::string(what) + ": " + e.message;
  return e;
}

/// Checks, without reading it, that `path` is a regular file of at most `limit` bytes: the same
/// errors `ptq::try_read_file` gives when it reads the file later, named by `what`.
[[nodiscard]] inline ptq::result<> check_input_file(const std::string& path, const char* what,
                                                    std::uint64_t limit) {
  struct ::stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return for_input(ptq::make_error(ptq::errc::file_open_failed,
                                     "cannot open '" + path + "': " + std::strerror(errno)),
                     what);
  }
  if (!S_ISREG(st.st_mode))
    return for_input(ptq::detail::not_regular(path, st.st_mode), what);
  if (static_cast<std::uint64_t>(st.st_size) > limit)
    return for_input(ptq::detail::too_large(path, static_cast<std::uint64_t>(st.st_size), limit),
                     what);
  return {};
}

/// check_input_file for a tensor file (.npy, safetensors).
[[nodiscard]] inline ptq::result<> check_tensor_file(const std::string& path, const char* what) {
  return check_input_file(path, what, max_tensor_bytes);
}

/// A text input (config, manifest, layer list), read up to max_text_bytes.
[[nodiscard]] inline ptq::result<std::string> read_text_input(const std::string& path,
                                                              const char* what) {
  auto text = ptq::try_read_file(path, max_text_bytes);
  if (!text)
    return for_input(text.error(), what);
  return text;
}

/// A safetensors input, read up to max_tensor_bytes.
[[nodiscard]] inline ptq::result<ptq::io::safetensors_file> read_tensor_input(
    const std::string& path, const char* what) {
  auto file = ptq::io::read_safetensors(path, max_tensor_bytes);
  if (!file)
    return for_input(file.error(), what);
  return file;
}

}  // namespace ptq_cli
