// The C++ snippets of README.md and docs/*.md are excerpts of compiled sources. Each ```cpp
// block is preceded by
//   <!-- snippet: examples/numerics_usage/main.cpp numerics -->
// and must equal, line for line, the region of that file between the lines
//   // [readme:numerics]   and   // [/readme:numerics]
// (`// [doc:NAME]` ... `// [/doc:NAME]` works the same: a source may mark regions for the docs
// too) with the markers' indentation removed. A ```python block with such a comment is the
// region of a .py file between `# [doc:NAME]` and `# [/doc:NAME]` (one without is free text).
// check_snippets() lists every way a document and the sources disagree; tests/package runs it on
// the README and every file of docs/.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace ptq_test {

struct snippet_ref {
  std::string file;      ///< relative to the source tree, e.g. "examples/config_usage/main.cpp"
  std::string region;    ///< the marker name, e.g. "usage"
  std::size_t line = 0;  ///< the document's line of the ```cpp fence (1-based)
};

namespace detail {

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line))
    lines.push_back(line);
  return lines;
}

inline std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos)
    return {};
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

/// "<!-- snippet: FILE REGION -->" -> {FILE, REGION}.
inline std::optional<snippet_ref> parse_snippet_comment(const std::string& line) {
  const std::string t = trim(line);
  const std::string open = "<!-- snippet:", close = "-->";
  if (t.rfind(open, 0) != 0 || t.size() < open.size() + close.size() ||
      t.compare(t.size() - close.size(), close.size(), close) != 0)
    return std::nullopt;
  std::istringstream words(t.substr(open.size(), t.size() - open.size() - close.size()));
  snippet_ref r;
  std::string extra;
  if (!(words >> r.file >> r.region) || (words >> extra))
    return std::nullopt;
  return r;
}

/// The lines of region `name` in `source`, without the markers' indentation; an error text
/// when the markers are missing, repeated or a line is indented less than its marker. The
/// markers are `// [readme:NAME]` or `// [doc:NAME]`, whichever the source has.
inline std::vector<std::string> region_lines(const std::string& source, const std::string& name,
                                             std::string& problem,
                                             const std::string& comment = "//") {
  const bool doc = source.find(comment + " [doc:" + name + "]") != std::string::npos;
  const std::string kind = doc ? "doc" : "readme";
  const std::string begin = comment + " [" + kind + ":" + name + "]",
                    end = comment + " [/" + kind + ":" + name + "]";
  const auto lines = split_lines(source);
  std::vector<std::string> out;
  std::size_t begins = 0, ends = 0, indent = 0;
  bool inside = false;
  for (const auto& l : lines) {
    const std::string t = trim(l);
    if (t == begin) {
      ++begins;
      inside = true;
      indent = l.find_first_not_of(" \t");
    } else if (t == end) {
      ++ends;
      inside = false;
    } else if (inside) {
      if (t.empty()) {
        out.emplace_back();
      } else if (l.size() < indent || l.find_first_not_of(" \t") < indent) {
        problem = "a line of region '" + name + "' is indented less than its marker: " + l;
        return {};
      } else {
        out.push_back(l.substr(indent));
      }
    }
  }
  if (begins != 1 || ends != 1 || inside)
    problem = "needs exactly one '" + begin + "' line and one '" + end + "' line after it";
  return out;
}

}  // namespace detail

/// Every disagreement between a document's text (`doc_name`, e.g. "README.md") and the sources
/// (empty: all snippets match). `read` gives a source file's text by its path relative to the
/// source tree, or nothing; `built` lists the sources the build compiles, so a snippet cannot
/// come from a file that is never compiled. `checked` receives every snippet found.
inline std::vector<std::string> check_snippets(
    const std::string& readme, const std::vector<std::string>& built,
    const std::function<std::optional<std::string>(const std::string&)>& read,
    std::vector<snippet_ref>* checked = nullptr, const std::string& doc_name = "README.md") {
  std::vector<std::string> problems;
  const auto lines = detail::split_lines(readme);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (detail::trim(lines[i]).rfind("```", 0) != 0)
      continue;
    const bool cpp = detail::trim(lines[i]) == "```cpp" || detail::trim(lines[i]) == "```c++" ||
                     detail::trim(lines[i]) == "```python";
    std::size_t j = i + 1;  // the closing fence
    while (j < lines.size() && detail::trim(lines[j]).rfind("```", 0) != 0)
      ++j;
    const std::string where = doc_name + ":" + std::to_string(i + 1) + ": ";
    if (!cpp) {
      i = j;
      continue;
    }
    if (j == lines.size()) {
      problems.push_back(where + "the ```cpp block is not closed");
      break;
    }
    const std::vector<std::string> block(lines.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                                         lines.begin() + static_cast<std::ptrdiff_t>(j));
    const auto ref = i > 0 ? detail::parse_snippet_comment(lines[i - 1]) : std::nullopt;
    if (!ref && detail::trim(lines[i]) == "```python") {  // a python block may be free text
      i = j;
      continue;
    }
    if (!ref) {
      problems.push_back(where + "a ```cpp block needs '<!-- snippet: FILE REGION -->' on the " +
                         "line before it");
      i = j;
      continue;
    }
    snippet_ref r = *ref;
    r.line = i + 1;
    if (checked)
      checked->push_back(r);
    const std::string what = where + r.file + " [" + r.region + "]: ";
    if (std::find(built.begin(), built.end(), r.file) == built.end()) {
      problems.push_back(what + "not a source the build compiles for the docs");
      i = j;
      continue;
    }
    const auto source = read(r.file);
    if (!source) {
      problems.push_back(what + "cannot read the file");
      i = j;
      continue;
    }
    std::string problem;
    const bool py = r.file.size() > 3 && r.file.compare(r.file.size() - 3, 3, ".py") == 0;
    const auto region = detail::region_lines(*source, r.region, problem, py ? "#" : "//");
    if (!problem.empty()) {
      problems.push_back(what + problem);
    } else if (region != block) {
      std::size_t k = 0;
      while (k < region.size() && k < block.size() && region[k] == block[k])
        ++k;
      problems.push_back(
          what + "differs from the document at the block's line " + std::to_string(k + 1) + " (" +
          doc_name + ":" + std::to_string(i + 2 + k) +
          "):\n  doc:    " + (k < block.size() ? block[k] : std::string("(block ends)")) +
          "\n  source: " + (k < region.size() ? region[k] : std::string("(region ends)")));
    }
    i = j;
  }
  return problems;
}

}  // namespace ptq_test
