// .npy io: float32 and float16 reading, writing round trip, and clean rejection of malformed
// files (bad magic, bad header, unsupported dtype, Fortran order, truncated data).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ptq/io/npy.hpp"

namespace {

std::string npy_bytes(const std::string& dict, const std::string& payload, char major = 1) {
  std::string h = dict;
  const std::size_t pre = major == 1 ? 10 : 12;
  while ((pre + h.size() + 1) % 64 != 0)
    h += ' ';
  h += '\n';
  std::string out("\x93NUMPY", 6);
  out += major;
  out += '\0';
  out += static_cast<char>(h.size() & 0xFF);
  out += static_cast<char>((h.size() >> 8) & 0xFF);
  if (major != 1)
    out += std::string(2, '\0');
  return out + h + payload;
}

std::string floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

}  // namespace

TEST_CASE("npy: float32 C order", "[io][npy]") {
  const auto b = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                           floats({1, 2, 3, 4, 5, 6}));
  auto r = ptq::io::try_parse_npy(b, "a.npy");
  REQUIRE(r.ok());
  CHECK(r.value().shape == std::vector<std::size_t>{2, 3});
  CHECK(r.value().data == std::vector<float>{1, 2, 3, 4, 5, 6});
  // version 2, 1-D and 0-D shapes
  auto v2 = ptq::io::try_parse_npy(
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", floats({7, 8}), 2));
  REQUIRE(v2.ok());
  CHECK(v2.value().shape == std::vector<std::size_t>{2});
  auto s0 = ptq::io::try_parse_npy(
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", floats({9})));
  REQUIRE(s0.ok());
  CHECK(s0.value().data == std::vector<float>{9});
  auto empty = ptq::io::try_parse_npy(
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4), }", ""));
  REQUIRE(empty.ok());
  CHECK(empty.value().size() == 0);
}

TEST_CASE("npy: float16 is read as float32", "[io][npy]") {
  const std::uint16_t h[] = {0x3C00, 0xC000, 0x0001, 0x7BFF, 0x3555, 0x0000, 0x8000, 0x7C00};
  std::string payload(reinterpret_cast<const char*>(h), sizeof h);
  auto r = ptq::io::try_parse_npy(
      npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (8,), }", payload));
  REQUIRE(r.ok());
  const auto& d = r.value().data;
  CHECK(d[0] == 1.0f);
  CHECK(d[1] == -2.0f);
  CHECK(d[2] == 5.9604644775390625e-08f);  // smallest subnormal
  CHECK(d[3] == 65504.0f);
  CHECK(d[4] == 0.333251953125f);
  CHECK(d[5] == 0.0f);
  CHECK(std::signbit(d[6]));
  CHECK(std::isinf(d[7]));
}

TEST_CASE("npy: malformed files are rejected with clear errors", "[io][npy]") {
  using ptq::errc;
  const std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  auto code = [](const std::string& bytes) {
    auto r = ptq::io::try_parse_npy(bytes, "x.npy");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.rfind("x.npy: ", 0) == 0);
    return r.error().code;
  };
  CHECK(code("") == errc::bad_magic);
  CHECK(code("PK\x03\x04 not numpy at all") == errc::bad_magic);
  std::string v9 = npy_bytes(ok_dict, floats({1, 2}));
  v9[6] = 9;
  CHECK(code(v9) == errc::bad_version);
  CHECK(code(npy_bytes("{'descr': '<f4', 'fortran_order': False}", floats({1, 2}))) ==
        errc::bad_header);
  CHECK(code(npy_bytes("['descr', '<f4']", floats({1, 2}))) == errc::bad_header);
  CHECK(code(npy_bytes("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }",
                       floats({1, 2}))) == errc::bad_header);
  CHECK(code(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }",
                       floats({1, 2}))) == errc::bad_header);
  CHECK(code(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
                       floats({1, 2, 3, 4}))) == errc::unsupported_dtype);
  CHECK(code(npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
                       floats({1, 2}))) == errc::unsupported_dtype);
  CHECK(code(npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }",
                       floats({1, 2}))) == errc::unsupported_dtype);
  CHECK(code(npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }",
                       floats({1, 2}))) == errc::fortran_order);
  CHECK(code(npy_bytes(ok_dict, floats({1}))) == errc::truncated);
  CHECK(code(npy_bytes(ok_dict, floats({1, 2, 3}))) == errc::trailing_data);
  CHECK(code(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, "
                       "99999999999), }",
                       "")) == errc::file_too_large);
  std::string cut = npy_bytes(ok_dict, floats({1, 2}));
  CHECK(code(cut.substr(0, 30)) == errc::truncated);  // header cut short
  // a header longer than 127 bytes (xtensor's reader decodes its length wrongly)
  std::string longd = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  longd.insert(longd.size() - 1, std::string(150, ' '));
  CHECK(ptq::io::try_parse_npy(npy_bytes(longd, floats({1, 2}))).ok());
  auto missing = ptq::io::try_read_npy("/nonexistent/dir/file.npy");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == errc::file_open_failed);
}

TEST_CASE("npy: write and read back", "[io][npy]") {
  const std::vector<float> v = {0.1f, -2.5f, 3e-8f, 1e30f, 0.0f, -0.0f};
  const std::string path = "ptq_numerics_test_roundtrip.npy";
  REQUIRE(ptq::io::write_npy(path, v.data(), {2, 3}).ok());
  auto r = ptq::io::try_read_npy(path);
  std::remove(path.c_str());
  REQUIRE(r.ok());
  CHECK(r.value().shape == std::vector<std::size_t>{2, 3});
  CHECK(std::memcmp(r.value().data.data(), v.data(), v.size() * sizeof(float)) == 0);
  const std::string one = ptq::io::format_npy(v.data(), {6});
  CHECK(one.find("'shape': (6,)") != std::string::npos);
  CHECK((one.size() - 6 * sizeof(float)) % 64 == 0);
}
