// Re-readers of the TensorRT cache and the ncnn table, written from the grammars the engines'
// own readers apply (ORT's ReadDynamicRange; ncnn2int8's read_int8scale_table), not from ptq's
// writers.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace ptq_test {

/// The TensorRT cache read back as ORT's ReadDynamicRange does: the header
/// regex, `name: hex` lines, the hex decoded to float32; returns name -> step.
inline std::map<std::string, float> parse_trt_cache(const std::string& text, std::string& header) {
  std::map<std::string, float> out;
  std::istringstream in(text);
  std::string line;
  REQUIRE(std::getline(in, header));
  REQUIRE(std::regex_match(header, std::regex("^TRT-[0-9]+-[A-Za-z0-9]+$")));
  const std::regex entry_re("^(.+): ([0-9a-f]{1,8})$");
  while (std::getline(in, line)) {
    std::smatch m;
    INFO(line);
    REQUIRE(std::regex_match(line, m, entry_re));
    const std::uint32_t bits = static_cast<std::uint32_t>(std::stoul(m[2].str(), nullptr, 16));
    float v = 0.0f;
    std::memcpy(&v, &bits, sizeof v);
    REQUIRE(std::isfinite(v));
    REQUIRE(v > 0.0f);
    REQUIRE(out.count(m[1].str()) == 0);
    out[m[1].str()] = v;
  }
  REQUIRE(text.back() == '\n');
  return out;
}

struct ncnn_tables {
  std::map<std::string, std::vector<float>> weights;  ///< "<layer>_param_0" -> multipliers
  std::map<std::string, float> blobs;
};

/// The ncnn table read back as ncnn2int8's read_int8scale_table does: no blank
/// line (it would end the table), keys with "_param_" are weights, the rest blobs.
inline ncnn_tables parse_ncnn_table(const std::string& text) {
  ncnn_tables out;
  std::istringstream in(text);
  std::string line;
  REQUIRE(text.back() == '\n');
  while (std::getline(in, line)) {
    INFO(line);
    REQUIRE_FALSE(line.empty());
    std::istringstream f(line);
    std::string key;
    f >> key;
    REQUIRE(key.size() <= 255);
    std::vector<float> v;
    std::string tok;
    while (f >> tok) {
      std::size_t used = 0;
      const float x = std::stof(tok, &used);
      REQUIRE(used == tok.size());
      REQUIRE(std::isfinite(x));
      REQUIRE(x > 0.0f);
      v.push_back(x);
    }
    REQUIRE_FALSE(v.empty());
    if (key.find("_param_") != std::string::npos) {
      out.weights[key] = v;
    } else {
      REQUIRE(v.size() == 1);
      out.blobs[key] = v[0];
    }
  }
  return out;
}

}  // namespace ptq_test
