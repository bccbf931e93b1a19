// The inline ABI namespace (ptq/core/abi.hpp): this TU has exceptions, abi_noexcept_tu.cpp is
// compiled with -fno-exceptions, both are linked into this binary. ptq's types must mangle
// differently in the two (ptq::abi_v0_ex vs ptq::abi_v0_noex), so the linker cannot take one
// TU's inline function body for the other's callers; user code still writes ptq::result<T>.
// Also the first of the ODR smoke test's two TUs with the umbrella header (odr_second_tu.cpp).
#include <ptq/ptq.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <typeinfo>

const char* ptq_abi_noexcept_result_name();  // abi_noexcept_tu.cpp
int ptq_abi_noexcept_value();                // abi_noexcept_tu.cpp

TEST_CASE("-fno-exceptions and exceptions TUs put ptq in different inline namespaces",
          "[package][abi]") {
  STATIC_REQUIRE(PTQ_EXCEPTIONS == 1);
  const std::string ex = typeid(ptq::result<int>).name();
  const std::string noex = ptq_abi_noexcept_result_name();
  INFO("exceptions TU: " << ex << ", -fno-exceptions TU: " << noex);
  // Itanium mangling: N3ptq9abi_v0_ex6resultIiEE vs N3ptq11abi_v0_noex6resultIiEE
  CHECK(ex.find("3ptq9abi_v0_ex") != std::string::npos);
  CHECK(noex.find("3ptq11abi_v0_noex") != std::string::npos);
  CHECK(ex != noex);
  // Both objects' ptq code runs in one binary, each with its own bodies.
  const ptq::result<int> r(41);
  CHECK(r.value() + 1 == ptq_abi_noexcept_value());
}
