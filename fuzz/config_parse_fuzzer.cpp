// libFuzzer target for the config layer: the proto-text parser, the canonical writer, per-layer
// resolution and the two JSON readers. Every input must come back as a result (never a crash, a
// hang or an exception), and these invariants must hold (a violation traps):
//
//   1. parse(text) ok            => parse(write(config)) ok and equal to config  (fmt round trip)
//   2. parse(text, no checks) ok => write(parse(write(config))) == write(config)  (fmt idempotent;
//                                   compares text, so NaN values cannot break it)
//   3. parse(text, tight limits) ok => parse(text) ok with an equal config  (limits only reject)
//   4. resolve(config, layers) ok => the toolkit JSON of the result reads back, equal
//   5. every failed result carries at least one error, every diagnostic renders (bounded, with
//      no control byte but newline and tab), and every known position lies inside the text (an
//      existing line, at most one past its end)
//
// The raw input is also fed to the detailed-JSON reader and the layer-list reader.
// Build: clang++-14 -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude ...
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ptq/config.hpp"
#include "ptq/config_json.hpp"

namespace {

/// Inputs above this size are skipped: the interesting bugs need no more.
constexpr std::size_t max_fuzz_input = std::size_t{64} << 10;

/// A rendered diagnostic is bounded whatever the input: message and note at most 1 KiB of text
/// each, the excerpt 120 bytes, every byte at most four when escaped.
constexpr std::size_t max_rendered = std::size_t{16} << 10;

[[noreturn]] void invariant_failed() {
  __builtin_trap();
}

/// Where the line that starts at `begin` ends: at LF, or at a CR that no LF follows (a lone CR
/// ends a line for the parser, W607), or at the end of the text.
std::size_t line_end(std::string_view text, std::size_t begin) {
  for (std::size_t i = begin; i < text.size(); ++i) {
    if (text[i] == '\n' || (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n')))
      return i;
  }
  return text.size();
}

/// A known position must name an existing line and a column at most one past its end (a CR of
/// a CR LF pair counts as a column, as the lexer counts it; a leading BOM does not).
void check_position(const ptq::diagnostic& d, std::string_view text) {
  if (!d.where.known())
    return;
  if (text.substr(0, 3) == "\xEF\xBB\xBF")
    text.remove_prefix(3);
  std::size_t begin = 0;
  for (std::uint32_t line = 1; line < d.where.begin.line; ++line) {
    const auto end = line_end(text, begin);
    if (end == text.size())
      invariant_failed();
    begin = end + 1;
  }
  const auto end = line_end(text, begin);
  if (d.where.begin.column == 0 || d.where.begin.column > end - begin + 1)
    invariant_failed();
}

template <class T>
void check_result(const ptq::result<T>& r, std::string_view text) {
  bool has_error = false;
  for (const auto& d : r.diagnostics()) {
    has_error = has_error || ptq::is_error(d);
    check_position(d, text);
    const std::string rendered = ptq::format_diagnostic(d, text, "fuzz.cfg");
    if (rendered.empty() || rendered.size() > max_rendered)
      invariant_failed();
    for (const char c : rendered) {  // nothing a terminal would act on
      const auto b = static_cast<unsigned char>(c);
      if ((b < 0x20 && c != '\n' && c != '\t') || b == 0x7F)
        invariant_failed();
    }
  }
  if (!r.ok() && !has_error)
    invariant_failed();
  if (r.ok() && has_error)
    invariant_failed();
}

const std::vector<ptq::layer_info>& fuzz_layers() {
  static const std::vector<ptq::layer_info> layers = [] {
    std::vector<ptq::layer_info> l;
    auto add = [&l](const char* name, ptq::layer_type t) {
      ptq::layer_info i;
      i.name = name;
      i.type = t;
      l.push_back(i);
    };
    add("conv1", ptq::layer_type::conv2d);
    add("Opname", ptq::layer_type::conv2d);
    add("conv3d", ptq::layer_type::conv3d);
    add("conv1d", ptq::layer_type::conv1d);
    add("deconv", ptq::layer_type::conv_transpose2d);
    add("deconv1d", ptq::layer_type::conv_transpose1d);
    add("fc", ptq::layer_type::linear);
    add("pool", ptq::layer_type::avg_pool2d);
    l[6].has_bias = false;
    l.push_back(l[0]);
    l.back().name = "grouped";
    l.back().groups = 2;
    l.back().in_channels = 7;
    return l;
  }();
  return layers;
}

void round_trip(std::string_view text) {
  const auto parsed = ptq::try_parse_config(text);
  check_result(parsed, text);

  // 3. Tighter limits may only turn a success into a failure, never change the result.
  ptq::parse_options tight;
  tight.limits.max_input_bytes = 4096;
  tight.limits.max_string_bytes = 64;
  tight.limits.max_depth = 3;
  const auto tight_parsed = ptq::try_parse_config(text, tight);
  check_result(tight_parsed, text);
  if (tight_parsed.ok() && (!parsed.ok() || !(tight_parsed.value() == parsed.value()))) {
    invariant_failed();
  }

  // 2. Without the value checks: the canonical text is a fixed point of parse + write.
  ptq::parse_options unchecked;
  unchecked.validate = false;
  const auto raw = ptq::try_parse_config(text, unchecked);
  check_result(raw, text);
  if (parsed.ok() && !raw.ok())
    invariant_failed();
  if (raw.ok()) {
    const std::string once = ptq::write_config(raw.value());
    const auto again = ptq::try_parse_config(once, unchecked);
    if (!again.ok())
      invariant_failed();
    if (ptq::write_config(again.value()) != once)
      invariant_failed();
  }

  if (!parsed.ok())
    return;
  const auto& config = parsed.value();

  // 1. write -> parse gives an equal config.
  const std::string written = ptq::write_config(config);
  const auto reparsed = ptq::try_parse_config(written);
  if (!reparsed.ok())
    invariant_failed();
  if (!(reparsed.value() == config))
    invariant_failed();

  // 4. Resolution, and its JSON read back.
  const auto resolved = ptq::resolve_config(config, fuzz_layers());
  check_result(resolved, text);
  ptq::resolve_options strict;
  strict.strict_channel_wise = true;
  check_result(ptq::resolve_config(config, fuzz_layers(), strict), text);
  if (resolved.ok()) {
    const std::string json = ptq::to_toolkit_json(resolved.value());
    const auto back = ptq::try_read_quant_config(json);
    if (!back.ok())
      invariant_failed();
    if (!(back.value() == resolved.value()))
      invariant_failed();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > max_fuzz_input)
    return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  round_trip(text);

  const auto quant = ptq::try_read_quant_config(text);
  check_result(quant, text);
  if (quant.ok()) {
    // A detailed config that reads must be written and read back unchanged.
    const std::string json = ptq::to_toolkit_json(quant.value());
    const auto back = ptq::try_read_quant_config(json);
    if (!back.ok() || !(back.value() == quant.value()))
      invariant_failed();
  }

  const auto layers = ptq::try_read_layer_list(text);
  check_result(layers, text);
  return 0;
}
