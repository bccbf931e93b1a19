// libFuzzer target for the model manifest reader (`parse_manifest`) over a small in-memory
// weights source: every input is a result (no crash, hang or exception, whatever the keys'
// types), and a manifest that reads has one layer description per entry.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "ptq/session/model_manifest.hpp"

namespace {

constexpr std::size_t max_fuzz_input = std::size_t{64} << 10;

struct fuzz_tensor {
  std::vector<std::size_t> shape;
  std::vector<float> data;
};

// Tensors named like the seed corpus's (examples/digits/manifest.json): "<anything>.weight" is
// a 2x2x3x3 weight, every other name a vector of 2, "missing" is not there.
struct fuzz_weights {
  [[nodiscard]] ptq::result<fuzz_tensor> get(std::string_view name) const {
    if (name == "missing")
      return ptq::make_error(ptq::errc::tensor_not_found, "tensor 'missing' is not in the file");
    if (name.size() >= 7 && name.substr(name.size() - 7) == ".weight")
      return fuzz_tensor{{2, 2, 3, 3}, std::vector<float>(36, 0.5f)};
    return fuzz_tensor{{2}, {1.0f, 2.0f}};
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > max_fuzz_input)
    return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto r = ptq::try_parse_manifest(text, fuzz_weights{});
  ptq_fuzz::check_result(r);
  return 0;
}
