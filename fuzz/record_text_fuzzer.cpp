// libFuzzer target for the record file's proto-text reader (`try_parse_record`): every input is
// a result (no crash, hang or exception), with and without a layer list; a record that reads
// is written (`write_record`) and reads back equal.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "ptq/session/record.hpp"

namespace {

/// A layer known by its channels alone (0: unknown), for the record's checks.
ptq::layer_info channels(std::string name, std::uint32_t cout, std::uint32_t cin) {
  ptq::layer_info l;
  l.name = std::move(name);
  if (cout != 0)
    l.out_channels = cout;
  if (cin != 0)
    l.in_channels = cin;
  return l;
}
constexpr std::size_t max_fuzz_input = std::size_t{64} << 10;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > max_fuzz_input)
    return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto rec = ptq::try_parse_record(text);
  ptq_fuzz::check_result(rec);
  static const std::vector<ptq::layer_info> layers{channels("conv1", 4, 3), channels("fc", 10, 16),
                                                   channels("pool", 0, 0)};
  ptq_fuzz::check_result(ptq::try_parse_record(text, &layers));
  if (rec.ok()) {
    const std::string written = ptq::write_record(rec.value());
    const auto back = ptq::try_parse_record(written);
    if (!back.ok() || !(back.value() == rec.value()))
      ptq_fuzz::invariant_failed();
  }
  return 0;
}
