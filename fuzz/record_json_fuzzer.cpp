// libFuzzer target for the record's JSON reader (`try_read_record_json`): every input is a
// result (no crash, hang or exception); a record that reads is written as JSON and reads back
// equal.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.hpp"
#include "ptq/session/record_json_io.hpp"

namespace {
constexpr std::size_t max_fuzz_input = std::size_t{64} << 10;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > max_fuzz_input)
    return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto rec = ptq::try_read_record_json(text);
  ptq_fuzz::check_result(rec);
  if (rec.ok()) {
    nlohmann::ordered_json j;
    ptq::to_json(j, rec.value());
    const auto back = ptq::try_read_record_json(j.dump());
    if (!back.ok() || !(back.value() == rec.value()))
      ptq_fuzz::invariant_failed();
  }
  return 0;
}
