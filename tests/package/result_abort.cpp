// Built with -fno-exceptions: value() of a failed result must abort with the error's message
// and no made-up location. The error points at line 3, column 7 of no known file, so the
// message has no position; tests/package/check_abort.cmake runs this and reads stderr.
#include <ptq/core/error.hpp>

int main() {
  ptq::error e = ptq::make_error(ptq::errc::invalid_argument, "the batch has 0 rows");
  e.where.begin = {3, 7};
  const ptq::result<int> r = e;
  return r.value();  // aborts
}
