// The binary frame every serialized statistic state travels in (docs/scale-out.md): little-endian
// fields, a magic, a format version, the state's kind, the payload length and an FNV-1a-64
// checksum of everything before it. The writer appends fixed-width fields; the reader checks
// every length against the bytes left before it allocates, so truncated or hostile input is an
// error (E14xx), never a crash or a huge allocation. Standard library only.
// Depends on: the standard library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "ptq/core/error.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// "PTQS": the first four bytes of every serialized state.
inline constexpr char wire_magic[4] = {'P', 'T', 'Q', 'S'};
/// The frame and payload format version this library writes and reads.
inline constexpr std::uint16_t wire_version = 1;
/// Bytes before the payload: magic, version (u16), kind (u16), payload length (u64).
inline constexpr std::size_t wire_header_size = 16;
/// Bytes after the payload: the checksum (u64).
inline constexpr std::size_t wire_trailer_size = 8;

/// What a frame holds; the number is part of the format.
enum class state_kind : std::uint16_t {
  minmax = 1,
  channel_absmax = 2,
  ifmr_tails = 3,
  ifmr_losses = 4,
  hfmg_ranges = 5,
  hfmg_bins = 6,
  invariant_histogram = 7,
  shard_states = 8,   ///< a session's per-layer states of one pass (shard_exchange.hpp)
  shard_results = 9,  ///< a sharded session's per-layer activation results
  shard_status = 10,  ///< one rank's status in a sharded exchange: ok and bytes, or an error
};

[[nodiscard]] constexpr const char* to_string(state_kind k) noexcept {
  switch (k) {
    case state_kind::minmax:
      return "minmax";
    case state_kind::channel_absmax:
      return "channel_absmax";
    case state_kind::ifmr_tails:
      return "ifmr_tails";
    case state_kind::ifmr_losses:
      return "ifmr_losses";
    case state_kind::hfmg_ranges:
      return "hfmg_ranges";
    case state_kind::hfmg_bins:
      return "hfmg_bins";
    case state_kind::invariant_histogram:
      return "invariant_histogram";
    case state_kind::shard_states:
      return "shard_states";
    case state_kind::shard_results:
      return "shard_results";
    case state_kind::shard_status:
      return "shard_status";
  }
  return "?";
}

/// FNV-1a, 64 bits: cheap and byte-order free; it detects corruption, it is no signature.
[[nodiscard]] inline std::uint64_t fnv1a64(std::string_view bytes) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

/// Appends little-endian fields to a payload.
struct wire_writer {
  std::string out;

  void u8(std::uint8_t v) { out.push_back(static_cast<char>(v)); }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i)
      out.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i)
      out.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
  }
  void f32(float v) {
    std::uint32_t b = 0;
    std::memcpy(&b, &v, sizeof b);
    u32(b);
  }
  void f64(double v) {
    std::uint64_t b = 0;
    std::memcpy(&b, &v, sizeof b);
    u64(b);
  }
  void f32s(const float* v, std::size_t n) {
    u64(n);
    for (std::size_t i = 0; i < n; ++i)
      f32(v[i]);
  }
  void f32s(const std::vector<float>& v) { f32s(v.data(), v.size()); }
  void f64s(const std::vector<double>& v) {
    u64(v.size());
    for (const double d : v)
      f64(d);
  }
  void i64s(const std::vector<std::int64_t>& v) {
    u64(v.size());
    for (const std::int64_t d : v)
      u64(static_cast<std::uint64_t>(d));
  }
  /// A length-prefixed byte string (a name, or a nested frame).
  void bytes(std::string_view b) {
    u64(b.size());
    out.append(b.data(), b.size());
  }
};

/// Reads little-endian fields of a payload; the first failure sticks (later reads return 0) and
/// `failed()` then says so, so a deserializer checks once at the end of each section.
class wire_reader {
 public:
  explicit wire_reader(std::string_view bytes) noexcept : s_(bytes) {}

  [[nodiscard]] bool failed() const noexcept { return failed_; }
  [[nodiscard]] std::size_t left() const noexcept { return s_.size() - pos_; }
  [[nodiscard]] bool at_end() const noexcept { return pos_ == s_.size(); }

  std::uint8_t u8() noexcept { return static_cast<std::uint8_t>(get(1)); }
  std::uint16_t u16() noexcept { return static_cast<std::uint16_t>(get(2)); }
  std::uint32_t u32() noexcept { return static_cast<std::uint32_t>(get(4)); }
  std::uint64_t u64() noexcept { return get(8); }
  float f32() noexcept {
    const std::uint32_t b = u32();
    float v = 0.0f;
    std::memcpy(&v, &b, sizeof v);
    return v;
  }
  double f64() noexcept {
    const std::uint64_t b = u64();
    double v = 0.0;
    std::memcpy(&v, &b, sizeof v);
    return v;
  }
  /// A count of elements of `elem` bytes each that must still fit in the payload: a larger one
  /// fails the reader (and returns 0) instead of asking for a huge allocation.
  std::size_t count(std::size_t elem) noexcept {
    const std::uint64_t n = u64();
    if (failed_ || (elem != 0 && n > left() / elem)) {
      failed_ = true;
      return 0;
    }
    return static_cast<std::size_t>(n);
  }
  std::vector<float> f32s() {
    std::vector<float> v(count(4));
    for (float& x : v)
      x = f32();
    return v;
  }
  std::vector<double> f64s() {
    std::vector<double> v(count(8));
    for (double& x : v)
      x = f64();
    return v;
  }
  std::vector<std::int64_t> i64s() {
    std::vector<std::int64_t> v(count(8));
    for (std::int64_t& x : v)
      x = static_cast<std::int64_t>(u64());
    return v;
  }
  /// A length-prefixed byte string, viewing the payload (empty once the reader failed).
  std::string_view bytes() noexcept {
    const std::size_t n = count(1);
    if (failed_)
      return {};
    const std::string_view v = s_.substr(pos_, n);
    pos_ += n;
    return v;
  }

 private:
  std::uint64_t get(std::size_t n) noexcept {
    if (failed_ || left() < n) {
      failed_ = true;
      return 0;
    }
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i)
      v |= static_cast<std::uint64_t>(static_cast<unsigned char>(s_[pos_ + i])) << (8 * i);
    pos_ += n;
    return v;
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  bool failed_ = false;
};

/// The whole frame of a payload: header, payload, checksum.
[[nodiscard]] inline std::string wire_frame(state_kind kind, const std::string& payload) {
  wire_writer w;
  w.out.append(wire_magic, sizeof wire_magic);
  w.out.push_back(static_cast<char>(wire_version & 0xffu));
  w.out.push_back(static_cast<char>(wire_version >> 8));
  const auto k = static_cast<std::uint16_t>(kind);
  w.out.push_back(static_cast<char>(k & 0xffu));
  w.out.push_back(static_cast<char>(k >> 8));
  w.u64(payload.size());
  w.out += payload;
  w.u64(fnv1a64(w.out));
  return std::move(w.out);
}

/// The payload of a frame of `kind`. Errors, in this order: too short for the header
/// (state_truncated), bad magic, unknown version, another kind (state_mismatch), payload or
/// checksum cut short (state_truncated), bytes after the checksum (state_invalid), checksum.
[[nodiscard]] inline result<std::string_view> wire_unframe(std::string_view bytes, state_kind kind,
                                                           std::string_view what) {
  const std::string w(what);
  if (bytes.size() < wire_header_size) {
    return make_error(errc::state_truncated,
                      w + ": truncated state: " + std::to_string(bytes.size()) +
                          " bytes, the header alone is " + std::to_string(wire_header_size));
  }
  if (std::memcmp(bytes.data(), wire_magic, sizeof wire_magic) != 0)
    return make_error(errc::state_bad_magic, w + ": not a ptq state (bad magic, expected 'PTQS')");
  wire_reader r(bytes.substr(4));
  // One read per statement: the operands of `|` are evaluated in no fixed order.
  const std::uint16_t version = r.u16();
  const std::uint16_t k = r.u16();
  const std::uint64_t len = r.u64();
  if (version != wire_version) {
    return make_error(errc::state_bad_version,
                      w + ": state format version " + std::to_string(version) +
                          ", this build reads version " + std::to_string(wire_version));
  }
  if (k != static_cast<std::uint16_t>(kind)) {
    return make_error(errc::state_mismatch, w + ": state of kind " + std::to_string(k) +
                                                ", expected " + to_string(kind) + " (" +
                                                std::to_string(static_cast<unsigned>(kind)) + ")");
  }
  const std::size_t body = bytes.size() - wire_header_size;
  if (len > body || body - len < wire_trailer_size) {
    return make_error(errc::state_truncated, w + ": truncated state: the header announces " +
                                                 std::to_string(len) +
                                                 " payload bytes and a checksum, " +
                                                 std::to_string(body) + " bytes follow");
  }
  if (body - len > wire_trailer_size) {
    return make_error(errc::state_invalid, w + ": " +
                                               std::to_string(body - len - wire_trailer_size) +
                                               " bytes after the state's checksum");
  }
  const std::size_t end = wire_header_size + static_cast<std::size_t>(len);
  wire_reader tail(bytes.substr(end));
  if (tail.u64() != fnv1a64(bytes.substr(0, end)))
    return make_error(errc::state_checksum_mismatch, w + ": state checksum mismatch (corrupted)");
  return bytes.substr(wire_header_size, static_cast<std::size_t>(len));
}

/// The error of a payload that read past its end or holds an impossible value.
[[nodiscard]] inline error wire_payload_error(std::string_view what, const std::string& detail) {
  return make_error(errc::state_invalid, std::string(what) + ": invalid state: " + detail);
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
