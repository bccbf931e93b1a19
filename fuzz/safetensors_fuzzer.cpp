// libFuzzer target for the safetensors reader (`parse_safetensors`, then `get` of every
// tensor): every input is a result (no crash, hang, out-of-bounds read or exception); every
// entry lies inside the data section, and a float tensor has as many values as its shape says.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.hpp"
#include "ptq/io/safetensors.hpp"

namespace {
constexpr std::size_t max_fuzz_input = std::size_t{1} << 20;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > max_fuzz_input)
    return 0;
  const auto r =
      ptq::io::try_parse_safetensors(std::string(reinterpret_cast<const char*>(data), size));
  ptq_fuzz::check_result(r);
  if (!r.ok())
    return 0;
  for (const auto& e : r->entries) {
    if (e.begin > e.end || e.end > r->data().size())
      ptq_fuzz::invariant_failed();
    const auto t = r->get(e.name);
    ptq_fuzz::check_result(t);
    if (t.ok() && t->data.size() != e.numel())
      ptq_fuzz::invariant_failed();
  }
  return 0;
}
