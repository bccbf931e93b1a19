// The compile-time benchmark's baseline: a TU of standard headers that every ptq TU includes
// too (benchmarks/compile_time.sh prints it first, so the others read as ratios).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

int main() {
  std::map<std::string, std::vector<std::optional<std::int64_t>>> m;
  m["a"].push_back(1);
  return static_cast<int>(m.size()) - 1;
}
