// ptq::result cannot be misused (docs/errors.md, "Results"): value() on a failure throws with
// the diagnostics (the -fno-exceptions abort is tests/package/result_abort.cpp), an empty result
// is a defined failure (E908), and failure_of passes every diagnostic on to another type.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "ptq/core/error.hpp"

namespace {
ptq::result<int> parse_digit(char c) {
  if (c < '0' || c > '9')
    return ptq::make_error(ptq::errc::invalid_argument, std::string("not a digit: ") + c);
  return c - '0';
}

ptq::result<double> half_of_digit(char c) {
  auto d = parse_digit(c);
  if (!d)
    return ptq::failure_of(d);
  return d.value() / 2.0;
}

ptq::result<> check_digit(char c) {
  auto d = parse_digit(c);
  if (!d)
    return ptq::failure_of(d);
  return {};
}
}  // namespace

TEST_CASE("result: value() of a failure throws the failure's diagnostics", "[core][result]") {
  ptq::result<int> bad = parse_digit('x');
  REQUIRE_FALSE(bad.ok());
  try {
    (void)bad.value();
    FAIL("value() returned");
  } catch (const ptq::exception& e) {
    CHECK(std::string(e.what()) == "not a digit: x");
    CHECK(e.code() == ptq::errc::invalid_argument);
    CHECK(e.diagnostics().size() == 1);
  }
  CHECK_THROWS_AS(*bad, ptq::exception);
  const ptq::result<std::string> no_text = ptq::make_error(ptq::errc::no_data, "no text");
  CHECK_THROWS_AS(no_text->size(), ptq::exception);
  CHECK_THROWS_AS(std::move(bad).value(), ptq::exception);
}

TEST_CASE("result: a default-constructed result is a failure with E908", "[core][result]") {
  const ptq::result<std::string> empty;
  CHECK_FALSE(empty.ok());
  CHECK(empty.error().code == ptq::errc::empty_result);
  CHECK(empty.error().message ==
        "the result was default-constructed: it holds no value and no error");
  CHECK_THROWS_AS(empty.value(), ptq::exception);
  // error() of a success is defined too (E908, no dereference of nothing).
  const ptq::result<> ok;
  CHECK(ok.ok());
  CHECK(ok.error().code == ptq::errc::empty_result);
  CHECK(ptq::result<int>(4).error().code == ptq::errc::empty_result);
}

TEST_CASE("result: failure_of passes errors and warnings to another result type",
          "[core][result]") {
  CHECK(half_of_digit('7').value() == 3.5);
  const auto bad = half_of_digit('?');
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ptq::errc::invalid_argument);
  CHECK(bad.error().message == "not a digit: ?");
  CHECK(check_digit('3').ok());
  CHECK(check_digit('a').error().message == "not a digit: a");

  ptq::result<int> warned(
      std::vector<ptq::error>{ptq::make_warning(ptq::errc::degraded_setting, "first a warning"),
                              ptq::make_error(ptq::errc::out_of_range, "then the error")});
  const ptq::result<std::string> passed = ptq::failure_of(warned);
  REQUIRE(passed.diagnostics().size() == 2);
  CHECK(passed.diagnostics()[0].message == "first a warning");
  CHECK(passed.error().message == "then the error");

  // Passing on a result that had no error is itself an error, never a silent success.
  const ptq::result<> from_success = ptq::failure_of(ptq::result<int>(1));
  CHECK_FALSE(from_success.ok());
  CHECK(from_success.error().code == ptq::errc::empty_result);
  CHECK(from_success.error().message == "a failure was passed on from a result that had no error");
}
