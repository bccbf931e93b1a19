// libFuzzer target for the detailed JSON config reader (`try_read_quant_config`): every input is
// a result (no crash, hang or exception); a config that reads is written (`to_toolkit_json`)
// and reads back equal.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "ptq/config_json.hpp"

namespace {
constexpr std::size_t max_fuzz_input = std::size_t{64} << 10;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > max_fuzz_input)
    return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto quant = ptq::try_read_quant_config(text);
  ptq_fuzz::check_result(quant);
  if (quant.ok()) {
    const std::string json = ptq::to_toolkit_json(quant.value());
    const auto back = ptq::try_read_quant_config(json);
    if (!back.ok() || !(back.value() == quant.value()))
      ptq_fuzz::invariant_failed();
  }
  return 0;
}
