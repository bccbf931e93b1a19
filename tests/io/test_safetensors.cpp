#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "ptq/io/safetensors.hpp"

namespace {

std::string with_header(const std::string& header, std::size_t data_bytes) {
  std::string out(8, '\0');
  const std::uint64_t n = header.size();
  for (std::size_t i = 0; i < 8; ++i)
    out[i] = static_cast<char>((n >> (8 * i)) & 0xFFU);
  return out + header + std::string(data_bytes, '\0');
}

std::string parse_error(const std::string& bytes) {
  ptq::io::safetensors_file f;
  std::string err;
  REQUIRE_FALSE(ptq::io::parse_safetensors(bytes, f, err));
  return err;
}

}  // namespace

TEST_CASE("safetensors round trip, F32 and converted dtypes", "[safetensors]") {
  const std::vector<ptq::io::named_tensor> t = {{"a", {2, 2}, {1, 2, 3, 4}}, {"b", {3}, {5, 6, 7}}};
  ptq::io::safetensors_file f;
  std::string err;
  REQUIRE(ptq::io::parse_safetensors(ptq::io::format_safetensors(t, {{"k", "v"}}), f, err));
  REQUIRE(f.entries.size() == 2);
  CHECK(f.metadata.at(0).second == "v");
  ptq::io::float_tensor x;
  REQUIRE(f.get("b", x, err));
  CHECK(x.shape == std::vector<std::size_t>{3});
  CHECK(x.data == std::vector<float>{5, 6, 7});
  // F16 1.0 = 0x3C00, BF16 -2.0 = 0xC000, F64 0.5
  std::string data;
  data += std::string("\x00\x3C", 2) + std::string("\x00\xC0", 2);
  const double half = 0.5;
  data.append(reinterpret_cast<const char*>(&half), 8);
  const std::string h =
      R"({"h":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},"g":{"dtype":"BF16","shape":[1],"data_offsets":[2,4]},"d":{"dtype":"F64","shape":[],"data_offsets":[4,12]},"i":{"dtype":"I64","shape":[0],"data_offsets":[12,12]}})";
  std::string bytes = with_header(h, 0) + data;
  REQUIRE(ptq::io::parse_safetensors(bytes, f, err));
  REQUIRE(f.get("h", x, err));
  CHECK(x.data[0] == 1.0f);
  REQUIRE(f.get("g", x, err));
  CHECK(x.data[0] == -2.0f);
  REQUIRE(f.get("d", x, err));
  CHECK(x.data[0] == 0.5f);
  CHECK_FALSE(f.get("i", x, err));
  CHECK(err.find("dtype I64") != std::string::npos);
  CHECK_FALSE(f.get("missing", x, err));
}

TEST_CASE("malformed safetensors are clear errors", "[safetensors]") {
  CHECK(parse_error("abc").find("too short") != std::string::npos);
  CHECK(parse_error(std::string("\xff\xff\xff\xff\x00\x00\x00\x00{}", 10)).find("header length") !=
        std::string::npos);
  CHECK(parse_error(with_header("not json", 0)).find("not a JSON object") != std::string::npos);
  CHECK(parse_error(with_header(R"({"a":{"dtype":"X9","shape":[1],"data_offsets":[0,4]}})", 4))
            .find("unsupported dtype") != std::string::npos);
  CHECK(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4))
            .find("need 2 x 4 bytes") != std::string::npos);
  CHECK(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", 4))
            .find("outside the data section") != std::string::npos);
  CHECK(
      parse_error(
          with_header(
              R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})",
              8))
          .find("overlap") != std::string::npos);
  CHECK(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4))
            .find("shape") != std::string::npos);
  CHECK(parse_error(with_header(R"({"a":{"dtype":"F32"}})", 4)).find("needs dtype, shape") !=
        std::string::npos);
}

TEST_CASE("writes are atomic: a failed write leaves the old file", "[safetensors]") {
  std::string err;
  CHECK_FALSE(ptq::io::write_file_atomic("/nonexistent-dir/x.txt", "data", err));
  CHECK(err.find("cannot create") != std::string::npos);
  const std::string path = "ptq_atomic_test.txt";
  REQUIRE(ptq::io::write_file_atomic(path, "one", err));
  REQUIRE(ptq::io::write_file_atomic(path, "two", err));
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f);
  char buf[8] = {};
  CHECK(std::fread(buf, 1, 8, f) == 3);
  std::fclose(f);
  CHECK(std::string(buf) == "two");
  std::remove(path.c_str());
}
