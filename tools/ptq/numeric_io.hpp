// Shared by the numeric subcommands (observe, weights, balance): runtime kernel dispatch,
// .npy loading with error reporting, and float printing that round-trips float32.
#pragma once

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "command.hpp"
#include "input_files.hpp"
#include "ptq/algorithms.hpp"
#include "ptq/detail/float_format.hpp"
#include "ptq/io/npy_map.hpp"

namespace ptq_cli {

/// The best kernel set this CPU runs (ptq::kernels, linked by ptq::ptq: avx512f / avx2+fma /
/// sse2).
[[nodiscard]] inline const ptq::kernels::kernel_set& numeric_kernels() noexcept {
  return ptq::kernels::dispatched_kernels();
}

/// Prints `ptq COMMAND: error: [FILE: ]message [E<code>]` (and its note); returns exit code 1.
inline int numeric_fail(const std::string& command, ptq::error e, const std::string& file = {}) {
  const std::string where = file.empty() ? e.path : file;
  if (!where.empty())
    e.message = where + ": " + e.message;
  e.path.clear();
  std::cerr << "ptq " << command << ": " << ptq::format_error(e);
  return exit_error;
}

/// Maps a .npy file (its float32 data is used in place), after the input file checks.
[[nodiscard]] inline ptq::result<ptq::io::npy_view> try_load_tensor(
    const std::string& path, ptq::io::npy_values mode = ptq::io::npy_values::as_float32) {
  if (auto st = check_tensor_file(path, "tensor"); !st)
    return st.error();
  return ptq::io::try_map_npy(path, ptq::default_mapped_file_limit, mode);
}

/// try_load_tensor that prints the error and returns nothing on failure.
[[nodiscard]] inline std::optional<ptq::io::npy_view> load_tensor(
    const std::string& path, const std::string& command,
    ptq::io::npy_values mode = ptq::io::npy_values::as_float32) {
  auto r = try_load_tensor(path, mode);
  if (!r) {
    numeric_fail(command, r.error());
    return std::nullopt;
  }
  return std::move(r).value();
}

/// Shortest decimal that reads back to the same float32; a negative zero is 0.
[[nodiscard]] inline std::string json_float(float v) {
  return ptq::detail::shortest_repr(v == 0.0f ? 0.0f : v);
}

template <class T, class F>
[[nodiscard]] std::string json_list(const std::vector<T>& v, F&& fmt) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i)
      s += ", ";
    s += fmt(v[i]);
  }
  return s + "]";
}

/// The --help footer of a numeric command: an example on the sample tensors of the bundled data.
[[nodiscard]] inline std::string numeric_example(const std::string& command) {
  return "Example, on the sample tensors of the source tree (installed in "
         "<prefix>/share/ptq/numerics/; examples/numerics/README.md says what they are):\n  " +
         command;
}

/// Layer type from its PyTorch class name; prints an error when unknown.
[[nodiscard]] inline std::optional<ptq::layer_type> parse_layer_type(const std::string& name,
                                                                     const std::string& command) {
  auto op = ptq::layer_type_from_string(name);
  if (!op)
    numeric_fail(command, ptq::make_error(ptq::errc::unknown_layer_type,
                                          "unknown layer type '" + name + "'"));
  return op;
}

inline const std::vector<std::string> numeric_layer_types{
    "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "Linear"};

/// `--type` (required, a PyTorch class name) and `--groups`: the layer a weight belongs to.
inline void add_layer_options(CLI::App& sub, std::string& type, std::size_t& groups) {
  sub.add_option("--type", type, "layer type (PyTorch class name)")
      ->required()
      ->check(CLI::IsMember(numeric_layer_types));
  sub.add_option("--groups", groups, "convolution groups")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

}  // namespace ptq_cli
