// Replay driver: runs LLVMFuzzerTestOneInput on files, so every fuzzer also builds as a plain
// program with any compiler and ctest can re-run its corpus.
//
//   <name>_replay [path...]   each path is a file or a directory (all regular files in it,
//                             recursively, in sorted order); no path = one empty input.
// Exits non-zero if a path does not exist or the fuzz target returns non-zero.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

// libFuzzer never passes a null pointer, not even for empty input; neither do we.
const std::uint8_t empty_input[1] = {0};

int run_bytes(const std::vector<std::uint8_t>& data) {
  return LLVMFuzzerTestOneInput(data.empty() ? empty_input : data.data(), data.size());
}

bool run_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.string().c_str());
    return false;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  std::vector<std::uint8_t> data(bytes.begin(), bytes.end());
  const int rc = run_bytes(data);
  if (rc != 0) {
    std::fprintf(stderr, "replay: %s: fuzz target returned %d\n", path.string().c_str(), rc);
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    const int rc = run_bytes({});
    std::printf("replay: ran 1 empty input\n");
    return rc == 0 ? 0 : 1;
  }
  std::size_t count = 0;
  bool ok = true;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg(argv[i]);
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> files;
      for (const auto& entry : fs::recursive_directory_iterator(arg)) {
        if (entry.is_regular_file()) {
          files.push_back(entry.path());
        }
      }
      std::sort(files.begin(), files.end());
      for (const auto& file : files) {
        ok = run_file(file) && ok;
        ++count;
      }
    } else if (fs::is_regular_file(arg, ec)) {
      ok = run_file(arg) && ok;
      ++count;
    } else {
      std::fprintf(stderr, "replay: no such file or directory: %s\n", argv[i]);
      ok = false;
    }
  }
  std::printf("replay: ran %zu input(s)%s\n", count, ok ? "" : ", with failures");
  return ok ? 0 : 1;
}
