// `ptq calibrate --timings`: the wall time of each part of a run, printed as one stderr line.
// The session's phases are timed by its progress events (the time up to an event belongs to
// the event's phase); the tool marks its own steps (load, open, finish, outputs) with lap().
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ptq_cli {

struct phase_timer {
  using clock = std::chrono::steady_clock;
  clock::time_point start = clock::now();
  clock::time_point last = start;
  std::vector<std::pair<std::string, double>> seconds;  ///< in the order of first appearance

  /// The time since the previous lap goes to `part`.
  void lap(std::string_view part) {
    const auto now = clock::now();
    const double s = std::chrono::duration<double>(now - last).count();
    last = now;
    for (auto& [name, total] : seconds) {
      if (name == part) {
        total += s;
        return;
      }
    }
    seconds.emplace_back(std::string(part), s);
  }

  /// "timings: load 0.123 s, fusion 0.004 s, ..., total 1.234 s"
  [[nodiscard]] std::string line() const {
    std::string out = "timings:";
    char buf[64];
    for (const auto& [name, s] : seconds) {
      std::snprintf(buf, sizeof buf, " %s %.3f s,", name.c_str(), s);
      out += buf;
    }
    std::snprintf(buf, sizeof buf, " total %.3f s",
                  std::chrono::duration<double>(last - start).count());
    return out + buf;
  }
};

}  // namespace ptq_cli
