// Second translation unit for the ODR smoke test: if a header defines a non-inline function or
// variable, linking this file with test_abi.cpp (the first TU, also with exceptions) fails with a
// duplicate symbol.
#include <ptq/version.hpp>

#if __has_include(<ptq/ptq.hpp>)
#include <ptq/ptq.hpp>
#endif

int ptq_odr_second_tu();

int ptq_odr_second_tu() {
  return PTQ_VERSION;
}
