// libFuzzer target for the .npy reader (`parse_npy`): every input is a result (no crash, hang,
// unbounded allocation or exception); an array that reads has as many values as its shape
// says, and a float32 one is written (`format_npy`) and reads back bit for bit.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "fuzz_check.hpp"
#include "ptq/io/npy.hpp"

namespace {
constexpr std::size_t max_fuzz_input = std::size_t{1} << 20;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > max_fuzz_input)
    return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto r = ptq::io::try_parse_npy(bytes, "fuzz.npy");
  ptq_fuzz::check_result(r);
  if (!r.ok())
    return 0;
  std::size_t n = 1;
  for (const auto d : r->shape)
    n *= d;
  if (n != r->data.size())
    ptq_fuzz::invariant_failed();
  const auto back = ptq::io::try_parse_npy(ptq::io::format_npy(r->data.data(), r->shape));
  if (!back.ok() || back->shape != r->shape ||
      (n && std::memcmp(back->data.data(), r->data.data(), n * sizeof(float)) != 0)) {
    ptq_fuzz::invariant_failed();
  }
  return 0;
}
