// The floors of docs/architecture.md, checked on every header under include/ptq/: a header
// includes headers of its own floor or of lower ones only, and its "// Depends on: ..." comment
// line names exactly the other floors and the libraries (xsimd, xtensor, nlohmann_json, MPI) its
// includes reach, or "the standard library". The umbrella headers (include/ptq/*.hpp) are faces
// that include whole floors and are not checked; ptq/version.hpp, beside them, is core's. Also
// the checker on small texts that must fail.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

/// docs/architecture.md's floors; a floor may include its own and lower ranks, but not another
/// floor of its own rank.
const std::map<std::string, int>& floor_ranks() {
  static const std::map<std::string, int> ranks = {
      {"core", 1},   {"detail", 2},     {"kernels", 3}, {"io", 3},     {"prototext", 4},
      {"config", 5}, {"algorithms", 6}, {"session", 7}, {"report", 8}, {"export", 8}};
  return ranks;
}

/// The library a system include belongs to, or "" for the standard library and POSIX.
std::string library_of(const std::string& header) {
  if (header.rfind("xsimd/", 0) == 0)
    return "xsimd";
  if (header.rfind("xtensor/", 0) == 0 || header.rfind("xtl/", 0) == 0)
    return "xtensor";
  if (header.rfind("nlohmann/", 0) == 0)
    return "nlohmann_json";
  if (header == "mpi.h")
    return "MPI";
  return "";
}

/// What `text` (header `rel`, e.g. "session/session_layer.hpp") breaks of the rules; empty if
/// nothing.
std::vector<std::string> layer_problems(const std::string& rel, const std::string& text) {
  std::vector<std::string> problems;
  const std::string own = rel.substr(0, rel.find('/'));
  const auto own_rank = floor_ranks().find(own);
  if (own_rank == floor_ranks().end())
    return {rel + ": not in a floor of docs/architecture.md"};
  std::set<std::string> reached;
  static const std::regex include_line(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  std::istringstream in(text);
  std::string line;
  std::string depends;
  bool leading_comment = true;
  while (std::getline(in, line)) {
    if (leading_comment && line.rfind("//", 0) != 0)
      leading_comment = false;
    if (leading_comment && line.rfind("// Depends on: ", 0) == 0)
      depends = line.substr(15);
    std::smatch m;
    if (!std::regex_search(line, m, include_line))
      continue;
    const std::string header = m[2];
    if (header.rfind("ptq/", 0) == 0) {
      const std::string rest = header.substr(4);
      // ptq/version.hpp stays where CMake reads it, beside the umbrellas; it is core's.
      const bool version = rest == "version.hpp";
      const std::string floor = version ? std::string("core") : rest.substr(0, rest.find('/'));
      const auto rank = floor_ranks().find(floor);
      if (rank == floor_ranks().end() || (rest.find('/') == std::string::npos && !version)) {
        problems.push_back(rel + ": includes " + header + ", which is not in a floor");
        continue;
      }
      if (floor != own && rank->second >= own_rank->second) {
        problems.push_back(rel + ": includes " + header + " of floor " + floor + ", not below " +
                           own);
      }
      if (floor != own)
        reached.insert(floor);
    } else if (const std::string lib = library_of(header); !lib.empty()) {
      reached.insert(lib);
    }
  }
  if (depends.empty()) {
    problems.push_back(rel + ": no \"// Depends on: \" line in its leading comment");
    return problems;
  }
  // "a (why), b and c." -> {a, b, c}
  const std::string plain = std::regex_replace(depends, std::regex(R"(\s*\([^)]*\))"), "");
  std::set<std::string> named;
  if (plain != "the standard library.") {
    if (plain.empty() || plain.back() != '.')
      problems.push_back(rel + ": the Depends on line does not end with a full stop");
    std::string list =
        std::regex_replace(plain.substr(0, plain.size() - 1), std::regex(" and "), ", ");
    std::istringstream items(list);
    std::string item;
    while (std::getline(items, item, ',')) {
      item.erase(0, item.find_first_not_of(' '));
      named.insert(item);
    }
  }
  if (named != reached) {
    std::string want;
    for (const auto& r : reached)
      want += (want.empty() ? "" : ", ") + r;
    problems.push_back(rel + ": Depends on: " + depends + " but the includes reach " +
                       (want.empty() ? std::string("the standard library only") : want));
  }
  return problems;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("every header keeps to its floor and says what it depends on", "[package][layers]") {
  const fs::path root = fs::path(PTQ_SOURCE_DIR) / "include" / "ptq";
  std::size_t headers = 0;
  std::vector<std::string> problems;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file() || e.path().extension() != ".hpp" || e.path().parent_path() == root)
      continue;
    ++headers;
    const std::string rel = fs::relative(e.path(), root).generic_string();
    const auto p = layer_problems(rel, read_text(e.path()));
    problems.insert(problems.end(), p.begin(), p.end());
  }
  std::sort(problems.begin(), problems.end());
  for (const auto& p : problems)
    UNSCOPED_INFO(p);
  CHECK(problems.empty());
  CHECK(headers > 100);
}

TEST_CASE("the layer checker finds what breaks the rules", "[package][layers]") {
  const std::string ok =
      "// A kernel.\n// Depends on: core (the errors) and xsimd.\n#pragma once\n"
      "#include <vector>\n#include <xsimd/xsimd.hpp>\n#include \"ptq/core/error.hpp\"\n"
      "#include \"ptq/kernels/minmax.hpp\"\n";
  CHECK(layer_problems("kernels/k.hpp", ok).empty());
  CHECK(layer_problems("core/c.hpp", "// Depends on: the standard library.\n#include <map>\n")
            .empty());

  const auto up = layer_problems(
      "kernels/k.hpp", "// Depends on: session.\n#include \"ptq/session/session_layer.hpp\"\n");
  REQUIRE(up.size() == 1);
  CHECK(up[0] ==
        "kernels/k.hpp: includes ptq/session/session_layer.hpp of floor session, not "
        "below kernels");
  const auto sideways =
      layer_problems("io/f.hpp", "// Depends on: kernels.\n#include \"ptq/kernels/gemm.hpp\"\n");
  REQUIRE(sideways.size() == 1);
  CHECK(sideways[0] == "io/f.hpp: includes ptq/kernels/gemm.hpp of floor kernels, not below io");

  const auto missing = layer_problems("core/c.hpp", "// No line.\n#include <map>\n");
  REQUIRE(missing.size() == 1);
  CHECK(missing[0] == "core/c.hpp: no \"// Depends on: \" line in its leading comment");
  const auto stale = layer_problems("config/c.hpp",
                                    "// Depends on: core.\n#include \"ptq/prototext/lexer.hpp\"\n"
                                    "#include <nlohmann/json.hpp>\n");
  REQUIRE(stale.size() == 1);
  CHECK(stale[0] ==
        "config/c.hpp: Depends on: core. but the includes reach nlohmann_json, prototext");
  // A line after the leading comment does not count.
  CHECK(layer_problems("core/c.hpp", "// A.\n#pragma once\n// Depends on: the standard library.\n")
            .size() == 1);
}

namespace {

/// Every header `rel` reaches through its includes, itself too: ptq headers by their path
/// under include/ptq/, the libraries by library_of's names.
std::set<std::string> reach_of(const fs::path& root, const std::string& rel) {
  static const std::regex include_line(R"(^\s*#\s*include\s*[<"]([^>"]+)[>"])");
  std::set<std::string> seen;
  std::vector<std::string> pending{rel};
  while (!pending.empty()) {
    const std::string at = pending.back();
    pending.pop_back();
    if (!seen.insert(at).second)
      continue;
    std::istringstream in(read_text(root / at));
    std::string line;
    while (std::getline(in, line)) {
      std::smatch m;
      if (!std::regex_search(line, m, include_line))
        continue;
      const std::string header = m[1];
      if (header.rfind("ptq/", 0) == 0)
        pending.push_back(header.substr(4));
      else if (const std::string lib = library_of(header); !lib.empty())
        seen.insert(lib);
    }
  }
  return seen;
}

}  // namespace

TEST_CASE("the record-only exporters reach neither xtensor nor the algorithms",
          "[package][layers]") {
  // A TensorRT cache or an ncnn table from a record alone must not compile the session's
  // tensors and numerics; only the manifest's face (qdq_table_from_manifest.hpp) does.
  const fs::path root = fs::path(PTQ_SOURCE_DIR) / "include" / "ptq";
  for (const char* rel : {"export/qdq_table.hpp", "export/trt_cache.hpp", "export/ncnn_table.hpp",
                          "export/aimet.hpp", "export/amct_deploy.hpp", "export/qdq_json.hpp",
                          "export/symmetric.hpp", "export/formats.hpp"}) {
    const auto reach = reach_of(root, rel);
    INFO(rel);
    CHECK(reach.count("xtensor") == 0u);
    CHECK(reach.count("xsimd") == 0u);
    CHECK(std::none_of(reach.begin(), reach.end(), [](const std::string& h) {
      return h.rfind("algorithms/", 0) == 0 || h.rfind("session/model_manifest", 0) == 0;
    }));
  }
  // The checker sees through includes: the manifest's face reaches the algorithms and xsimd
  // (the layer descriptions hold tensor views: nothing of ptq reaches xtensor any more).
  const auto full = reach_of(root, "export/qdq_table_from_manifest.hpp");
  CHECK(full.count("xsimd") == 1u);
  CHECK(full.count("xtensor") == 0u);
  CHECK(full.count("algorithms/layer/conv_bn_fusion.hpp") == 1u);
}
