// Where the tool finds its bundled data (the sample configs and the digits model), for a binary
// in a build tree and for an installed one. `ptq calibrate --help` and `ptq demo --help` print
// the same list (bundled_search_text), so a user can see where it looks.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace ptq_cli {

/// The folder that holds `configs/` (quant.cfg, layers.json, ...) and `digits/` (manifest.json
/// and the tensors): `examples/` of a source tree or `<prefix>/share/ptq/` of an install.
/// Searched in this order: `share/ptq` and `examples` in the binary's folder and each folder
/// above it, `examples` in the current directory, then the source tree the binary was built
/// from. Empty when none has both files.
[[nodiscard]] inline std::filesystem::path find_bundled_data() {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  std::error_code ec;
  const auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (auto dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      candidates.push_back(dir / "share" / "ptq");
      candidates.push_back(dir / "examples");
      if (dir == dir.root_path())
        break;
    }
  }
  const auto cwd = fs::current_path(ec);
  if (!ec)
    candidates.push_back(cwd / "examples");
#ifdef PTQ_SOURCE_DIR
  candidates.push_back(fs::path(PTQ_SOURCE_DIR) / "examples");
#endif
  for (const auto& c : candidates) {
    if (fs::is_regular_file(c / "digits" / "manifest.json", ec) &&
        fs::is_regular_file(c / "configs" / "quant.cfg", ec)) {
      return c;
    }
  }
  return {};
}

/// The search order above, for --help and for the error when nothing is found.
inline constexpr const char* bundled_search_text =
    "The bundled data (configs/ and digits/) is looked for in share/ptq/ and examples/ next to "
    "the binary and in each folder above it, then in ./examples, then in the source tree the "
    "binary was built from; `cmake --install` puts it in <prefix>/share/ptq/.";

}  // namespace ptq_cli
