// Version macros must agree with each other and with project(VERSION) in CMakeLists.txt.
// (The ODR smoke test's two TUs with the umbrella header are test_abi.cpp and odr_second_tu.cpp.)
#include <ptq/version.hpp>

#include <catch2/catch.hpp>
#include <string>

int ptq_odr_second_tu();  // defined in odr_second_tu.cpp

TEST_CASE("version macros are consistent", "[package]") {
  STATIC_REQUIRE(PTQ_VERSION ==
                 PTQ_VERSION_MAJOR * 10000 + PTQ_VERSION_MINOR * 100 + PTQ_VERSION_PATCH);
  const std::string from_parts = std::to_string(PTQ_VERSION_MAJOR) + "." +
                                 std::to_string(PTQ_VERSION_MINOR) + "." +
                                 std::to_string(PTQ_VERSION_PATCH);
  CHECK(from_parts == PTQ_VERSION_STRING);
  CHECK(std::string(PTQ_EXPECTED_VERSION) == PTQ_VERSION_STRING);
}

TEST_CASE("ptq::version mirrors the macros", "[package]") {
  STATIC_REQUIRE(ptq::version.major == PTQ_VERSION_MAJOR);
  STATIC_REQUIRE(ptq::version.minor == PTQ_VERSION_MINOR);
  STATIC_REQUIRE(ptq::version.patch == PTQ_VERSION_PATCH);
  CHECK(std::string(ptq::version.string) == PTQ_VERSION_STRING);
}

TEST_CASE("two translation units including the headers link together", "[package]") {
  CHECK(ptq_odr_second_tu() == PTQ_VERSION);
}
