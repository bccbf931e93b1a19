// libFuzzer target for the statistic states' wire format (state_wire.hpp): every input, given to
// every kind's deserializer, is a result (no crash, hang, unbounded allocation or exception); a
// state that reads back serializes to bytes that read back to the same bytes again. Also the
// status frame of a sharded exchange (core/shard_reduce.hpp): a result, and one that reads
// back re-encodes to the same bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "ptq/algorithms/scale_out/state_wire.hpp"
#include "ptq/core/shard_reduce.hpp"

namespace {

constexpr std::size_t max_fuzz_input = std::size_t{1} << 20;

template <class Deserialize>
void round_trip(std::string_view bytes, Deserialize deserialize) {
  const auto r = deserialize(bytes);
  ptq_fuzz::check_result(r);
  if (!r.ok())
    return;
  const std::string once = ptq::serialize(r.value());
  const auto again = deserialize(once);
  if (!again.ok() || ptq::serialize(again.value()) != once)
    ptq_fuzz::invariant_failed();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > max_fuzz_input)
    return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  round_trip(bytes, [](std::string_view b) { return ptq::deserialize_minmax(b, "fuzz"); });
  round_trip(bytes, [](std::string_view b) { return ptq::deserialize_channel_absmax(b, "fuzz"); });
  round_trip(bytes, [](std::string_view b) { return ptq::deserialize_ifmr_tails(b, "fuzz"); });
  round_trip(bytes, [](std::string_view b) { return ptq::deserialize_ifmr_losses(b, "fuzz"); });
  round_trip(bytes, [](std::string_view b) { return ptq::deserialize_hfmg_ranges(b, "fuzz"); });
  round_trip(bytes, [](std::string_view b) { return ptq::deserialize_hfmg_bins(b, "fuzz"); });
  round_trip(bytes,
             [](std::string_view b) { return ptq::deserialize_invariant_histogram(b, "fuzz"); });
  std::size_t rank = 0;
  const auto status = ptq::detail::decode_shard_status(bytes, 0, rank);
  ptq_fuzz::check_result(status);
  if (status.ok() && ptq::detail::encode_shard_status(status, rank) != bytes)
    ptq_fuzz::invariant_failed();
  return 0;
}
