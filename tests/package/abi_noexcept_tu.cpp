// Compiled with -fno-exceptions (tests/package/CMakeLists.txt) and linked with test_abi.cpp,
// which has exceptions: ptq's declarations must land in another inline namespace here
// (ptq::abi_v0_noex), so the two objects share no inline function body by name.
#include <ptq/ptq.hpp>

#include <typeinfo>

static_assert(PTQ_EXCEPTIONS == 0, "this TU must be compiled with -fno-exceptions");

const char* ptq_abi_noexcept_result_name();
int ptq_abi_noexcept_value();

const char* ptq_abi_noexcept_result_name() {
  return typeid(ptq::result<int>).name();
}

// Instantiates inline functions of ptq in this object (result<int>'s constructor and value()).
int ptq_abi_noexcept_value() {
  const ptq::result<int> r(41);
  return r.ok() ? r.value() + 1 : 0;
}
