// The manifest of `--model` (or the bundled one), read over the tensors of the weights file.
// Apart from input_files.hpp: the manifest brings the library's layer types and algorithms.
#pragma once

#include <string>

#include "input_files.hpp"
#include "ptq/io/safetensors.hpp"
#include "ptq/session/model_manifest.hpp"

namespace ptq_cli {

/// The manifest file `path` over `weights`; every error names the manifest file (`what` names
/// it where the file cannot be read).
[[nodiscard]] inline ptq::result<ptq::model_manifest> read_manifest_input(
    const std::string& path, const ptq::io::safetensors_file& weights,
    const char* what = "--model") {
  auto text = read_text_input(path, what);
  if (!text)
    return text.error();
  auto parsed = ptq::try_parse_manifest(text.value(), weights);
  if (!parsed) {
    auto e = parsed.error();
    if (e.path.empty())
      e.path = path;
    return e;
  }
  return parsed;
}

}  // namespace ptq_cli
