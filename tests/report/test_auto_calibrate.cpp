// The toolkit's BinarySearch (report/auto_calibrate.hpp) with a hand-made evaluator: the ranking
// worst first, the calls in order, the fewest layers kept in float, and the evaluation count.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ptq/report/auto_calibrate.hpp"

namespace {

/// Scores of n layers "l0".."l(n-1)": l0 the worst (lowest dB).
std::vector<ptq::sensitivity_entry> scores(std::size_t n) {
  std::vector<ptq::sensitivity_entry> s;
  for (std::size_t i = n; i-- > 0;)  // given best first: the search ranks them
    s.push_back({"l" + std::to_string(i), 10.0 + static_cast<double>(i)});
  return s;
}

/// Accepts a calibration when at least `need` of the worst layers are in float.
struct evaluator {
  std::size_t need;
  std::vector<std::size_t> asked;
  ptq::result<ptq::auto_calibration_verdict> operator()(const std::vector<std::string>& skip) {
    asked.push_back(skip.size());
    for (std::size_t i = 0; i < skip.size(); ++i)
      CHECK(skip[i] == "l" + std::to_string(i));  // a prefix of the ranking
    return ptq::auto_calibration_verdict{skip.size() >= need, 1.0 - 0.1 * double(skip.size())};
  }
};

}  // namespace

TEST_CASE("auto_calibrate: every layer quantized, when that is accepted, is one evaluation",
          "[report][auto]") {
  evaluator e{0, {}};
  const auto r = ptq::auto_calibrate(scores(8), std::ref(e));
  REQUIRE(r.ok());
  CHECK(r.value().ranking.front() == "l0");
  CHECK(r.value().skip_layers.empty());
  CHECK(r.value().accepted);
  CHECK(e.asked == std::vector<std::size_t>{0});
}

TEST_CASE("auto_calibrate: the fewest worst layers in float, by binary search", "[report][auto]") {
  for (std::size_t n = 1; n <= 17; ++n) {
    for (std::size_t need = 1; need <= n; ++need) {
      INFO("n " << n << ", need " << need);
      evaluator e{need, {}};
      const auto r = ptq::auto_calibrate(scores(n), std::ref(e));
      REQUIRE(r.ok());
      const std::size_t bound = 2 + static_cast<std::size_t>(std::floor(std::log2(double(n))));
      CHECK(e.asked.size() <= bound);
      CHECK(r.value().steps.size() == e.asked.size());
      if (need < n) {  // an evaluated set is accepted: the smallest one
        CHECK(r.value().accepted);
        CHECK(r.value().skip_layers.size() == need);
      } else {  // only every layer in float would do: the toolkit's ALL_ROLL_BACK, not evaluated
        CHECK_FALSE(r.value().accepted);
        CHECK(r.value().skip_layers.size() == n);
        CHECK(std::find(e.asked.begin(), e.asked.end(), n) == e.asked.end());
      }
    }
  }
  // Hand-derived: 8 layers, 3 needed: 0 (no), then [0, 7]: mid 3 -> 4 (yes), [0, 2]: mid 1 ->
  // 2 (no), [2, 2]: mid 2 -> 3 (yes), [2, 1]: done.
  evaluator e{3, {}};
  const auto r = ptq::auto_calibrate(scores(8), std::ref(e));
  REQUIRE(r.ok());
  CHECK(e.asked == std::vector<std::size_t>{0, 4, 2, 3});
  CHECK(r.value().skip_layers == std::vector<std::string>{"l0", "l1", "l2"});
}

TEST_CASE("auto_calibrate: an evaluator's error ends the search", "[report][auto]") {
  int calls = 0;
  const auto r = ptq::auto_calibrate(
      scores(4),
      [&](const std::vector<std::string>&) -> ptq::result<ptq::auto_calibration_verdict> {
        if (++calls == 2)
          return ptq::make_error(ptq::errc::invalid_argument, "evaluation 2 failed");
        return ptq::auto_calibration_verdict{false, 0.0};
      });
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "evaluation 2 failed");
  CHECK(calls == 2);
}
