// The C++ snippets of README.md and docs/*.md equal the marked regions of sources the build
// compiles (and runs): tests/support/readme_snippets.hpp, on the real documents and on small
// texts that must fail.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "../support/readme_snippets.hpp"

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, ',')) {
    if (!item.empty())
      out.push_back(item);
  }
  return out;
}

std::optional<std::string> read_source(const std::string& rel) {
  std::ifstream in(std::string(PTQ_SOURCE_DIR) + "/" + rel, std::ios::binary);
  if (!in)
    return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("every C++ snippet of README.md is a marked region of a compiled source", "[readme]") {
  const auto readme = read_source("README.md");
  REQUIRE(readme.has_value());
  const auto built = split_list(PTQ_README_SOURCES);
  std::vector<ptq_test::snippet_ref> checked;
  const auto problems = ptq_test::check_snippets(*readme, built, read_source, &checked);
  for (const auto& p : problems)
    FAIL_CHECK(p);
  CHECK(problems.empty());
  // The three snippets today (Usage, Numerics, AdaRound); each source is compiled and run.
  std::vector<std::string> regions;
  for (const auto& r : checked)
    regions.push_back(r.file + " " + r.region);
  CHECK(regions == std::vector<std::string>{"examples/config_usage/main.cpp usage",
                                            "examples/numerics_usage/main.cpp numerics",
                                            "examples/ada_usage/main.cpp adaround"});
}

TEST_CASE("the snippet check fails on every kind of disagreement", "[readme]") {
  const std::map<std::string, std::string> files{
      {"a.cpp", "// top\n// [readme:x]\nint f() {\n  return 1;\n}\n// [/readme:x]\n"},
      {"indented.cpp",
       "void g() {\n  // [readme:y]\n  int a = 1;\n\n  a += 2;\n  // [/readme:y]\n}\n"},
      {"twice.cpp", "// [readme:x]\n// [/readme:x]\n// [readme:x]\n// [/readme:x]\n"},
      {"open.cpp", "// [readme:x]\nint a;\n"},
      {"shallow.cpp", "  // [readme:x]\nint a;\n  // [/readme:x]\n"},
      {"doc.cpp", "// [doc:x]\nint d;\n// [/doc:x]\n// [readme:x]\nint r;\n// [/readme:x]\n"},
  };
  const std::vector<std::string> built{"a.cpp",       "indented.cpp", "twice.cpp", "open.cpp",
                                       "shallow.cpp", "missing.cpp",  "doc.cpp"};
  const auto read = [&](const std::string& f) -> std::optional<std::string> {
    const auto it = files.find(f);
    return it == files.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  const auto check = [&](const std::string& readme) {
    return ptq_test::check_snippets(readme, built, read);
  };
  const std::string good =
      "# t\n<!-- snippet: a.cpp x -->\n```cpp\nint f() {\n  return 1;\n}\n```\n"
      "text\n<!-- snippet: indented.cpp y -->\n```cpp\nint a = 1;\n\na += 2;\n```\n"
      "```sh\nnot C++\n```\n";
  CHECK(check(good).empty());

  const auto one = [&](const std::string& readme, const std::string& part) {
    const auto p = check(readme);
    INFO(readme);
    REQUIRE(p.size() == 1);
    INFO(p[0]);
    CHECK(p[0].find(part) != std::string::npos);
  };
  // a changed line, a missing line, an extra line: the first differing line is named
  one("<!-- snippet: a.cpp x -->\n```cpp\nint f() {\n  return 2;\n}\n```\n",
      "README.md:2: a.cpp [x]: differs from the document at the block's line 2 "
      "(README.md:4):\n  doc:      return 2;\n  source:   return 1;");
  one("<!-- snippet: a.cpp x -->\n```cpp\nint f() {\n}\n```\n", "at the block's line 2");
  one("<!-- snippet: a.cpp x -->\n```cpp\nint f() {\n  return 1;\n}\n\n```\n",
      "source: (region ends)");
  // indentation counts
  one("<!-- snippet: a.cpp x -->\n```cpp\nint f() {\nreturn 1;\n}\n```\n", "differs");
  // a block without its comment, or with a malformed one
  one("```cpp\nint f();\n```\n", "needs '<!-- snippet: FILE REGION -->'");
  one("<!-- snippet: a.cpp -->\n```cpp\nint f();\n```\n", "needs '<!-- snippet:");
  one("<!-- snippet: a.cpp x\n```cpp\nint f();\n```\n", "needs '<!-- snippet:");
  // the comment must be on the line right before the fence
  one("<!-- snippet: a.cpp x -->\n\n```cpp\nint f() {\n  return 1;\n}\n```\n", "needs");
  // a file the build does not compile, a file that cannot be read
  one("<!-- snippet: other.cpp x -->\n```cpp\n```\n", "not a source the build compiles");
  one("<!-- snippet: missing.cpp x -->\n```cpp\n```\n", "cannot read the file");
  // markers missing, repeated or not closed; a line indented less than its marker
  one("<!-- snippet: a.cpp z -->\n```cpp\n```\n", "needs exactly one '// [readme:z]'");
  one("<!-- snippet: twice.cpp x -->\n```cpp\n```\n", "needs exactly one");
  one("<!-- snippet: open.cpp x -->\n```cpp\nint a;\n```\n", "needs exactly one");
  one("<!-- snippet: shallow.cpp x -->\n```cpp\nint a;\n```\n", "indented less than its marker");
  // an unclosed block
  one("<!-- snippet: a.cpp x -->\n```cpp\nint f() {\n", "not closed");
  // a source with [doc:x] markers: that region is the one (a [readme:x] beside it is not)
  CHECK(check("<!-- snippet: doc.cpp x -->\n```cpp\nint d;\n```\n").empty());
  one("<!-- snippet: doc.cpp x -->\n```cpp\nint r;\n```\n", "differs");
  // the document's name is in every message
  const auto named = ptq_test::check_snippets("```cpp\n```\n", built, read, nullptr, "docs/x.md");
  REQUIRE(named.size() == 1);
  CHECK(named[0].rfind("docs/x.md:1: ", 0) == 0);
}

TEST_CASE("every C++ snippet of docs/*.md is a marked region of a compiled source", "[readme]") {
  const auto built = split_list(PTQ_README_SOURCES);
  std::vector<std::string> docs;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(PTQ_SOURCE_DIR) / "docs")) {
    if (entry.path().extension() == ".md")
      docs.push_back("docs/" + entry.path().filename().string());
  }
  std::sort(docs.begin(), docs.end());
  REQUIRE(docs.size() >= 10);
  std::vector<std::string> regions;
  for (const auto& doc : docs) {
    const auto text = read_source(doc);
    REQUIRE(text.has_value());
    std::vector<ptq_test::snippet_ref> checked;
    const auto problems = ptq_test::check_snippets(*text, built, read_source, &checked, doc);
    for (const auto& p : problems)
      FAIL_CHECK(p);
    for (const auto& r : checked)
      regions.push_back(doc + " " + r.file + " " + r.region);
  }
  // The snippets today: the layers' tensor views, the session, the policy path, the report, the
  // exporters, and the README's numerics example again.
  CHECK(regions ==
        std::vector<std::string>{"docs/calibrate.md examples/session_usage/main.cpp layers",
                                 "docs/calibrate.md examples/session_usage/main.cpp session",
                                 "docs/calibrate.md examples/session_usage/main.cpp policies",
                                 "docs/export.md examples/session_usage/main.cpp export",
                                 "docs/numerics.md examples/session_usage/main.cpp policies",
                                 "docs/numerics.md examples/numerics_usage/main.cpp numerics",
                                 "docs/python.md examples/python/torch_usage.py bindings",
                                 "docs/python.md examples/python/torch_usage.py torch",
                                 "docs/python.md examples/python/torch_usage.py amct",
                                 "docs/python.md examples/python/torch_usage.py auto",
                                 "docs/report.md examples/session_usage/main.cpp report"});
}
