// Error corpus of the config layer: malformed and out-of-range inputs, each with the exact code
// and 1-based `line:col` of its first error (worked out by hand from the text), a dozen-plus with
// the whole rendered message, the warnings W601-W605, resolution errors, detailed-JSON errors,
// layer-list errors and the size limits. Every table is a plain array: add a row to extend it.
//
// Positions count bytes; a tab is one column. `0:0` means the diagnostic has no source position
// (input too large, layer-list problems, JSON rule violations, nothing to quantize).
#include <catch2/catch.hpp>

#include <cstdint>
#include <iterator>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ptq/config.hpp"
#include "ptq/config_json.hpp"
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

using namespace std::string_view_literals;
using ptq::errc;

struct pos {
  std::uint32_t line;
  std::uint32_t col;
};

std::string pos_text(ptq::source_position p) {
  return std::to_string(p.line) + ":" + std::to_string(p.column);
}
std::string pos_text(pos p) {
  return std::to_string(p.line) + ":" + std::to_string(p.col);
}

std::string code_text(errc c) {
  return std::to_string(static_cast<unsigned>(c));
}

// ---------------------------------------------------------------------------------------------
// 1. Text that try_parse_config rejects (1xx lexical, 11x syntax, 2xx schema, 3xx values).
// ---------------------------------------------------------------------------------------------
struct parse_case {
  std::string_view name;
  std::string_view text;
  errc code;
  pos at;
};

// clang-format off
const parse_case parse_cases[] = {
    // ---- 101 unexpected_character -----------------------------------------------------------
    {"stray @", "batch_num: 1 @\n", errc::unexpected_character, {1, 14}},
    {"stray $ on line 2", "batch_num: 1\nskip_layers: \"a\" $\n", errc::unexpected_character, {2, 18}},
    {"non-ASCII byte outside a string", "batch_num: 1\n\xc3\xa9\n", errc::unexpected_character, {2, 1}},
    {"= inside a block", "common_config {\n  arq_quantize { channel_wise: true }\n  = \n}\n", errc::unexpected_character, {3, 3}},
    {"tabs count as one column", "batch_num:\t\t!", errc::unexpected_character, {1, 13}},
    {"CRLF line ends", "batch_num: 1\r\n@\r\n", errc::unexpected_character, {2, 1}},
    {"NUL byte", "batch_num: 1\0"sv, errc::unexpected_character, {1, 13}},
    // ---- 102 unterminated_string ------------------------------------------------------------
    {"string runs to end of input", "skip_layers: \"abc\n", errc::unterminated_string, {1, 14}},
    {"single quote closed by nothing", "skip_layers: 'abc\"\n", errc::unterminated_string, {1, 14}},
    {"multi-line string with two words", "skip_layers: \"a\nb\"\n", errc::unterminated_string, {1, 14}},
    {"backslash at end of input", "skip_layers: \"ab\\", errc::unterminated_string, {1, 14}},
    {"missing close quote swallows the rest", "batch_num: 2\nskip_layers: \"conv1\ndo_fusion: false\n", errc::unterminated_string, {2, 14}},
    // ---- 103 bad_escape ---------------------------------------------------------------------
    {"unknown escape \\q", "skip_layers: \"\\q\"", errc::bad_escape, {1, 15}},
    {"\\x without hex digit", "skip_layers: \"a\\x\"", errc::bad_escape, {1, 16}},
    {"octal escape above \\377", "skip_layers: \"\\400\"", errc::bad_escape, {1, 15}},
    {"\\u with two digits", "skip_layers: \"\\u12\"", errc::bad_escape, {1, 15}},
    {"\\u surrogate", "skip_layers: \"\\uD800\"", errc::bad_escape, {1, 15}},
    {"\\U above U+10FFFF", "skip_layers: \"\\U00110000\"", errc::bad_escape, {1, 15}},
    {"bad escape in an indented line", "override_layer_configs {\n  layer_name: 'conv\\z1'\n}\n", errc::bad_escape, {2, 20}},
    // ---- 104 bad_number ---------------------------------------------------------------------
    {"two decimal points (integer field)", "batch_num: 1.2.3\n", errc::bad_number, {1, 12}},
    {"digits then letters", "batch_num: 12abc\n", errc::bad_number, {1, 12}},
    {"bare 0x", "batch_num: 0x\n", errc::bad_number, {1, 12}},
    {"hex in a float field", "common_config {\n  ifmr_quantize {\n    search_step: 0x10\n  }\n}\n", errc::bad_number, {3, 18}},
    {"exponent without digits", "common_config { dmq_balancer { migration_strength: 1e } }", errc::bad_number, {1, 52}},
    {"two points (float field)", "common_config { ifmr_quantize { max_percentile: 1.0.0 } }", errc::bad_number, {1, 49}},
    {"double sign (float field)", "common_config { ifmr_quantize { max_percentile: --1 } }", errc::bad_number, {1, 49}},
    // ---- 110 unexpected_token ---------------------------------------------------------------
    {"extra closing brace", "common_config { } }\n", errc::unexpected_token, {1, 19}},
    {"two values for one field", "batch_num: 1 2\n", errc::unexpected_token, {1, 14}},
    {"colon as a value", "batch_num: :\n", errc::unexpected_token, {1, 12}},
    {"quoted field name", "\"batch_num\": 1\n", errc::unexpected_token, {1, 1}},
    {"semicolon inside a list", "skip_layers: [\"a\"; \"b\"]", errc::unexpected_token, {1, 18}},
    {"] as a message value", "common_config { arq_quantize: ] }", errc::unexpected_token, {1, 31}},
    {"> inside { }", "common_config { > }", errc::unexpected_token, {1, 17}},
    {"< closed by }", "common_config < arq_quantize { } }", errc::unexpected_token, {1, 34}},
    {"double separator", "batch_num: 1,,\n", errc::unexpected_token, {1, 14}},
    {"list starting with a comma", "skip_layers: [,]", errc::unexpected_token, {1, 15}},
    {"trailing comma in a list", "skip_layers: [\"a\",]", errc::unexpected_token, {1, 19}},
    // ---- 112 unexpected_end -----------------------------------------------------------------
    {"unclosed blocks", "common_config { arq_quantize {\n", errc::unexpected_end, {2, 1}},
    {"colon then end", "batch_num:", errc::unexpected_end, {1, 11}},
    {"field name then end", "batch_num", errc::unexpected_end, {1, 10}},
    {"unclosed list points at [", "skip_layers: [\"a\", \"b\"\n", errc::unexpected_end, {1, 14}},
    {"unclosed common_config", "common_config {\n  arq_quantize { channel_wise: true }\n", errc::unexpected_end, {3, 1}},
    {"[ then end", "skip_layers: [", errc::unexpected_end, {1, 15}},
    // ---- 113 missing_colon ------------------------------------------------------------------
    {"number without colon", "batch_num 3\n", errc::missing_colon, {1, 11}},
    {"nested number without colon", "common_config {\n  arq_quantize {\n    quant_bits 8\n  }\n}\n", errc::missing_colon, {3, 16}},
    {"string without colon", "skip_layers \"conv1\"", errc::missing_colon, {1, 13}},
    {"identifier without colon", "do_fusion true", errc::missing_colon, {1, 11}},
    // ---- 201 unknown_field ------------------------------------------------------------------
    {"misspelt top-level field", "batch_nun: 3", errc::unknown_field, {1, 1}},
    {"misspelt nested field", "common_config {\n  arq_quantize {\n    quant_bit: 8\n  }\n}\n", errc::unknown_field, {3, 5}},
    {"ifmr instead of ifmr_quantize", "common_config { ifmr { } }", errc::unknown_field, {1, 17}},
    {"joint_quant is not in this schema", "joint_quant: true", errc::unknown_field, {1, 1}},
    {"IFMR field in an HFMG block", "common_config { hfmg_quantize { search_step: 0.1 } }", errc::unknown_field, {1, 33}},
    {"unknown field in OverrideLayer", "override_layer_configs {\n  layer: \"fc\"\n}\n", errc::unknown_field, {2, 3}},
    // ---- 202 wrong_type ---------------------------------------------------------------------
    {"string for an integer", "batch_num: \"3\"", errc::wrong_type, {1, 12}},
    {"value for a message", "common_config: 3", errc::wrong_type, {1, 16}},
    {"message for a value", "batch_num { }", errc::wrong_type, {1, 11}},
    {"yes is not a boolean", "do_fusion: yes", errc::wrong_type, {1, 12}},
    {"2 is not a boolean", "activation_offset: 2", errc::wrong_type, {1, 20}},
    {"unquoted layer name", "skip_layers: conv1", errc::wrong_type, {1, 14}},
    {"quoted float", "common_config { ifmr_quantize { max_percentile: \"0.9\" } }", errc::wrong_type, {1, 49}},
    {"quoted enum", "common_config { hfmg_quantize { dst_type: \"INT8\" } }", errc::wrong_type, {1, 43}},
    {"word for a float", "common_config { ifmr_quantize { search_step: abc } }", errc::wrong_type, {1, 46}},
    {"true for an integer", "batch_num: true", errc::wrong_type, {1, 12}},
    {"string for a repeated message", "override_layer_types: \"Conv2d\"", errc::wrong_type, {1, 23}},
    // ---- 203 missing_field ------------------------------------------------------------------
    {"OverrideLayerType without calibration_config", "override_layer_types {\n  layer_type: \"Conv2d\"\n}\n", errc::missing_field, {1, 1}},
    {"OverrideLayer without layer_name", "override_layer_configs {\n  calibration_config { }\n}\n", errc::missing_field, {1, 1}},
    {"OverrideLayerType without layer_type", "override_layer_types { calibration_config { } }", errc::missing_field, {1, 1}},
    {"older dialect without its blocks", "weight_offset: false\n", errc::missing_field, {1, 16}},
    {"older dialect: arq without channel_wise", "conv_calibration_config { arq_quantize { } }\nfc_calibration_config { }\n", errc::missing_field, {1, 27}},
    {"older dialect: ifmr without its fields", "fc_calibration_config {\n  ifmr_quantize { search_range_start: 0.7 }\n}\nconv_calibration_config { }\n", errc::missing_field, {2, 3}},
    // ---- 204 value_does_not_fit -------------------------------------------------------------
    {"negative uint32", "batch_num: -1", errc::value_does_not_fit, {1, 12}},
    {"2^32 for uint32", "batch_num: 4294967296", errc::value_does_not_fit, {1, 12}},
    {"fraction for an integer", "batch_num: 1.5", errc::value_does_not_fit, {1, 12}},
    {"exponent form for an integer", "batch_num: 1e3", errc::value_does_not_fit, {1, 12}},
    {"overflowing integer", "common_config { hfmg_quantize { num_of_bins: 99999999999999999999999 } }", errc::value_does_not_fit, {1, 46}},
    {"negative num_iteration", "common_config {\n  ada_quantize {\n    num_iteration: -5\n  }\n}\n", errc::value_does_not_fit, {3, 20}},
    // ---- 205 unknown_enum_value -------------------------------------------------------------
    {"unknown fakequant mode", "fakequant_precision_mode: FP32", errc::unknown_enum_value, {1, 27}},
    {"INT4 is not a dst_type", "common_config { ifmr_quantize { dst_type: INT4 } }", errc::unknown_enum_value, {1, 43}},
    {"enum number without a name", "common_config { hfmg_quantize { dst_type: 3 } }", errc::unknown_enum_value, {1, 43}},
    {"fakequant mode 0", "fakequant_precision_mode: 0", errc::unknown_enum_value, {1, 27}},
    {"enum names are case-sensitive", "common_config { ifmr_quantize { dst_type: int8 } }", errc::unknown_enum_value, {1, 43}},
    // ---- 206 not_repeated -------------------------------------------------------------------
    {"list for batch_num", "batch_num: [1, 2]", errc::not_repeated, {1, 1}},
    {"list for common_config", "common_config [ { } ]", errc::not_repeated, {1, 1}},
    {"list for asymmetric", "common_config {\n  ifmr_quantize {\n    asymmetric: [true]\n  }\n}\n", errc::not_repeated, {3, 5}},
    // ---- 301 percentile_out_of_range --------------------------------------------------------
    {"max_percentile 0.5", "common_config {\n  ifmr_quantize {\n    max_percentile: 0.5\n  }\n}\n", errc::percentile_out_of_range, {3, 21}},
    {"min_percentile above 1", "common_config {\n  ifmr_quantize {\n    min_percentile: 1.0001\n  }\n}\n", errc::percentile_out_of_range, {3, 21}},
    {"max_percentile nan", "common_config {\n  ifmr_quantize {\n    max_percentile: nan\n  }\n}\n", errc::percentile_out_of_range, {3, 21}},
    // ---- 302 search_range_invalid -----------------------------------------------------------
    {"search_range_start 0", "common_config {\n  ifmr_quantize {\n    search_range_start: 0\n  }\n}\n", errc::search_range_invalid, {3, 25}},
    {"start above end", "common_config {\n  ifmr_quantize {\n    search_range_start: 1.3\n    search_range_end: 0.7\n  }\n}\n", errc::search_range_invalid, {4, 23}},
    {"start above the default end", "common_config {\n  ifmr_quantize {\n    search_range_start: 1.5\n  }\n}\n", errc::search_range_invalid, {3, 25}},
    {"infinite end (fuzzer finding)", "common_config { ifmr_quantize { search_range_end: inf search_step: 1e10 } }", errc::search_range_invalid, {1, 51}},
    // ---- 303 search_step_invalid ------------------------------------------------------------
    {"search_step 0", "common_config {\n  ifmr_quantize {\n    search_step: 0\n  }\n}\n", errc::search_step_invalid, {3, 18}},
    {"step wider than the range", "common_config {\n  ifmr_quantize {\n    search_range_start: 0.7\n    search_range_end: 0.8\n    search_step: 0.2\n  }\n}\n", errc::search_step_invalid, {5, 18}},
    {"negative step", "common_config { ifmr_quantize { search_step: -0.01 } }", errc::search_step_invalid, {1, 46}},
    {"infinite step", "common_config { ifmr_quantize { search_step: inf } }", errc::search_step_invalid, {1, 46}},
    {"step giving 600,000,000 candidates", "common_config { ifmr_quantize { search_step: 1e-9 } }", errc::search_step_invalid, {1, 46}},
    {"layer step giving too many candidates", "override_layer_configs {\n  layer_name: \"a\"\n  calibration_config {\n    ifmr_quantize { search_step: 1e-12 }\n  }\n}\n", errc::search_step_invalid, {4, 34}},
    // ---- 304 num_of_bins_invalid ------------------------------------------------------------
    {"num_of_bins 1000", "common_config { hfmg_quantize { num_of_bins: 1000 } }", errc::num_of_bins_invalid, {1, 46}},
    {"num_of_bins 0 in an override", "override_layer_types {\n  layer_type: \"Linear\"\n  calibration_config { hfmg_quantize { num_of_bins: 0 } }\n}\n", errc::num_of_bins_invalid, {3, 53}},
    // ---- 305 migration_strength_out_of_range ------------------------------------------------
    {"migration_strength 0.9", "common_config { dmq_balancer { migration_strength: 0.9 } }", errc::migration_strength_out_of_range, {1, 52}},
    {"migration_strength just below 0.2", "common_config { dmq_balancer { migration_strength: 0.19999 } }", errc::migration_strength_out_of_range, {1, 52}},
    // ---- 306 ada_param_out_of_range ---------------------------------------------------------
    {"reg_param 1", "common_config {\n  ada_quantize {\n    reg_param: 1\n  }\n}\n", errc::ada_param_out_of_range, {3, 16}},
    {"warm_start 0", "common_config {\n  ada_quantize {\n    warm_start: 0\n  }\n}\n", errc::ada_param_out_of_range, {3, 17}},
    // ---- 307 beta_range_invalid -------------------------------------------------------------
    {"beta start below end", "common_config {\n  ada_quantize {\n    beta_range_start: 2\n    beta_range_end: 5\n  }\n}\n", errc::beta_range_invalid, {4, 21}},
    {"beta end 0", "common_config {\n  ada_quantize {\n    beta_range_end: 0\n  }\n}\n", errc::beta_range_invalid, {3, 21}},
    {"beta start below the default end", "common_config {\n  ada_quantize {\n    beta_range_start: 1\n  }\n}\n", errc::beta_range_invalid, {3, 23}},
    {"infinite beta start (fuzzer finding)", "common_config { ada_quantize { beta_range_start: inf } }", errc::beta_range_invalid, {1, 50}},
    // ---- 308 quant_bits_invalid -------------------------------------------------------------
    {"quant_bits 5", "common_config {\n  arq_quantize {\n    quant_bits: 5\n  }\n}\n", errc::quant_bits_invalid, {3, 17}},
    {"quant_bits 16 in an override", "override_layer_configs {\n  layer_name: \"fc\"\n  calibration_config { arq_quantize { quant_bits: 16 } }\n}\n", errc::quant_bits_invalid, {3, 51}},
    // ---- 309 batch_num_invalid --------------------------------------------------------------
    {"batch_num 0", "batch_num: 0", errc::batch_num_invalid, {1, 12}},
    {"batch_num -0", "batch_num: -0", errc::batch_num_invalid, {1, 12}},
    // ---- 312 weight_offset_invalid ----------------------------------------------------------
    {"weight_offset true", "common_config { }\nweight_offset: true\n", errc::weight_offset_invalid, {2, 16}},
    // ---- 313 legacy_fc_channel_wise ---------------------------------------------------------
    {"fc_calibration_config channel_wise true", "conv_calibration_config { arq_quantize { channel_wise: true } }\nfc_calibration_config { arq_quantize { channel_wise: true } }\n", errc::legacy_fc_channel_wise, {2, 54}},
    // ---- 314 duplicate_entry ----------------------------------------------------------------
    {"skip_layers twice", "skip_layers: \"a\"\nskip_layers: \"a\"\n", errc::duplicate_entry, {2, 14}},
    {"override_layer_configs twice", "override_layer_configs { layer_name: \"x\" calibration_config { } }\noverride_layer_configs { layer_name: \"x\" calibration_config { } }\n", errc::duplicate_entry, {2, 38}},
    {"override_layer_types twice", "override_layer_types { layer_type: \"Linear\" calibration_config { } }\noverride_layer_types { layer_type: \"Linear\" calibration_config { } }\n", errc::duplicate_entry, {2, 36}},
    {"skip_layer_types list with a repeat", "skip_layer_types: [\"Conv2d\", \"Conv2d\"]", errc::duplicate_entry, {1, 30}},
    {"skip_fusion_layers twice", "skip_fusion_layers: [\"c1\", \"c2\", \"c1\"]", errc::duplicate_entry, {1, 34}},
    // ---- 315 unknown_layer_type -------------------------------------------------------------
    {"placeholder Optype", "skip_layer_types: \"Optype\"", errc::unknown_layer_type, {1, 19}},
    {"Conv4d in override_layer_types", "override_layer_types { layer_type: \"Conv4d\" calibration_config { } }", errc::unknown_layer_type, {1, 36}},
    {"type names are case-sensitive", "skip_layer_types: \"conv2d\"", errc::unknown_layer_type, {1, 19}},
    // ---- 316 all_types_skipped --------------------------------------------------------------
    {"every type skipped", "skip_layer_types: [\"Conv2d\", \"Conv3d\", \"Linear\", \"ConvTranspose2d\", \"AvgPool2d\", \"Conv1d\", \"ConvTranspose1d\", \"GRU\", \"LSTM\"]", errc::all_types_skipped, {1, 20}},
    // ---- order: the first error is the first one found, not the first in the text ----------
    {"binder error reported before a value error", "batch_num: 0\nbatch_nun: 1\n", errc::unknown_field, {2, 1}},
    {"double sign (integer field)", "batch_num: --1", errc::bad_number, {1, 12}},
    {"8 in an octal literal", "batch_num: 08", errc::bad_number, {1, 12}},
};
// clang-format on

// ---------------------------------------------------------------------------------------------
// 3. Whole rendered messages: format_diagnostic(first error, text, "cfg").
// ---------------------------------------------------------------------------------------------
struct render_case {
  std::string_view text;
  std::string_view rendered;
};

// clang-format off
const render_case render_cases[] = {
    {"batch_nun: 3",
     "cfg:1:1: error: unknown field 'batch_nun' in AMCTConfig [E201]\n"
     " 1 | batch_nun: 3\n"
     "   | ^~~~~~~~~\n"
     "note: did you mean 'batch_num'?\n"},
    {"batch_num: 1 @",
     "cfg:1:14: error: unexpected character '@' [E101]\n"
     " 1 | batch_num: 1 @\n"
     "   |              ^\n"},
    {"batch_num:\t\t!",
     "cfg:1:13: error: unexpected character '!' [E101]\n"
     " 1 | batch_num:\t\t!\n"
     "   |           \t\t^\n"},
    {"skip_layers: \"abc\n",
     "cfg:1:14: error: string literal is not closed [E102]\n"
     " 1 | skip_layers: \"abc\n"
     "   |              ^\n"},
    {"skip_layers: \"\\q\"",
     "cfg:1:15: error: unknown escape sequence '\\q' [E103]\n"
     " 1 | skip_layers: \"\\q\"\n"
     "   |               ^~\n"},
    {"batch_num: 1.2.3",
     "cfg:1:12: error: malformed number '1.2.3' [E104]\n"
     " 1 | batch_num: 1.2.3\n"
     "   |            ^~~~~\n"},
    {"common_config { } }",
     "cfg:1:19: error: unexpected '}'; expected a field name [E110]\n"
     " 1 | common_config { } }\n"
     "   |                   ^\n"},
    {"common_config { arq_quantize {\n",
     "cfg:2:1: error: unexpected end of input; expected '}' to close the message [E112]\n"
     " 2 | \n"
     "   | ^\n"},
    {"batch_num 3",
     "cfg:1:11: error: expected ':' between a field name and its value [E113]\n"
     " 1 | batch_num 3\n"
     "   |           ^\n"},
    {"batch_num: \"3\"",
     "cfg:1:12: error: field 'batch_num' takes an integer, not a string [E202]\n"
     " 1 | batch_num: \"3\"\n"
     "   |            ^~~\n"},
    {"override_layer_types {\n  layer_type: \"Conv2d\"\n}\n",
     "cfg:1:1: error: required field 'calibration_config' is missing in OverrideLayerType [E203]\n"
     " 1 | override_layer_types {\n"
     "   | ^~~~~~~~~~~~~~~~~~~~\n"},
    {"batch_num: -1",
     "cfg:1:12: error: value -1 does not fit field 'batch_num' (an unsigned 32-bit integer: 0 to 4294967295) [E204]\n"
     " 1 | batch_num: -1\n"
     "   |            ^~\n"},
    {"common_config { ifmr_quantize { dst_type: INT4 } }",
     "cfg:1:43: error: 'INT4' is not a value of field 'dst_type' [E205]\n"
     " 1 | common_config { ifmr_quantize { dst_type: INT4 } }\n"
     "   |                                           ^~~~\n"
     "note: did you mean 'INT8'?\n"},
    {"common_config {\n  ifmr_quantize {\n    max_percentile: 0.5\n  }\n}\n",
     "cfg:3:21: error: max_percentile 0.5 is out of range; it must be in (0.5, 1] [E301]\n"
     " 3 |     max_percentile: 0.5\n"
     "   |                     ^~~\n"},
    {"common_config {\n  arq_quantize {\n    quant_bits: 5\n  }\n}\n",
     "cfg:3:17: error: quant_bits 5 is not supported; use 4, 6, 7 or 8 [E308]\n"
     " 3 |     quant_bits: 5\n"
     "   |                 ^\n"
     "note: 6 and 7 apply to Conv2d only\n"},
    {"batch_num: 0",
     "cfg:1:12: error: batch_num must be greater than 0 [E309]\n"
     " 1 | batch_num: 0\n"
     "   |            ^\n"},
    {"skip_layers: \"a\"\nskip_layers: \"a\"\n",
     "cfg:2:14: error: skip_layers names layer 'a' twice (first at 1:14) [E314]\n"
     " 2 | skip_layers: \"a\"\n"
     "   |              ^~~\n"},
    {"skip_layer_types: \"Optype\"",
     "cfg:1:19: error: 'Optype' is not a quantizable layer type [E315]\n"
     " 1 | skip_layer_types: \"Optype\"\n"
     "   |                   ^~~~~~~~\n"
     "note: valid types: Conv2d, Conv3d, Linear, ConvTranspose2d, AvgPool2d, Conv1d, ConvTranspose1d, GRU, LSTM\n"},
};
// clang-format on

// ---------------------------------------------------------------------------------------------
// 4. Warnings: the parse succeeds and reports the warning at its place.
// ---------------------------------------------------------------------------------------------
struct warning_case {
  std::string_view name;
  std::string_view text;
  errc code;
  pos at;
};

// clang-format off
const warning_case warning_cases[] = {
    {"string spanning lines", "skip_layers: \"\nfc\n\"\n", errc::string_spans_lines, {1, 14}},
    {"seed-style layer_name on its own lines", "override_layer_configs : {\nlayer_name :\n\"\nOpname\n\"\ncalibration_config : { }\n}\n", errc::string_spans_lines, {3, 1}},
    {"scalar given twice", "batch_num: 1\nbatch_num: 2\n", errc::field_repeated, {2, 1}},
    {"nested scalar given twice", "common_config {\n  arq_quantize { quant_bits: 8 quant_bits: 4 }\n}\n", errc::field_repeated, {2, 32}},
    {"ada replaces arq", "common_config { arq_quantize { } ada_quantize { } }", errc::oneof_replaced, {1, 34}},
    {"ifmr replaces hfmg", "common_config {\n  hfmg_quantize { }\n  ifmr_quantize { }\n}\n", errc::oneof_replaced, {3, 3}},
    {"legacy block beside common_config", "common_config { }\nconv_calibration_config { }\n", errc::legacy_blocks_ignored, {2, 1}},
    {"legacy block beside override_layer_types", "override_layer_types { layer_type: \"Linear\" calibration_config { } }\nfc_calibration_config { arq_quantize { channel_wise: false } }\n", errc::legacy_blocks_ignored, {2, 1}},
};
// clang-format on

// ---------------------------------------------------------------------------------------------
// 5. Resolution against a small layer list (4xx, and the W605 degradations).
// ---------------------------------------------------------------------------------------------
struct resolve_case {
  std::string_view name;
  std::string_view text;
  std::string_view layers;  ///< JSON layer list
  bool strict;
  errc code;
  pos at;
  bool is_warning;
};

constexpr std::string_view two_layers =
    R"([{"name": "conv1", "type": "Conv2d"}, {"name": "fc", "type": "Linear"}])";
constexpr std::string_view four_layers =
    R"([{"name": "conv1", "type": "Conv2d"}, {"name": "fc", "type": "Linear", "bias": false},
        {"name": "c3", "type": "Conv3d"}, {"name": "pool", "type": "AvgPool2d"}])";

// clang-format off
const resolve_case resolve_cases[] = {
    {"skip_layers names a missing layer", "skip_layers: \"conv9\"", two_layers, false, errc::unknown_layer, {1, 14}, false},
    {"override for a missing layer", "override_layer_configs {\n  layer_name: \"head\"\n  calibration_config { }\n}\n", two_layers, false, errc::unknown_layer, {2, 15}, false},
    {"skip_fusion_layers names a missing layer", "skip_fusion_layers: \"nope\"", two_layers, false, errc::unknown_layer, {1, 21}, false},
    {"skip_fusion_layers names a Linear", "skip_fusion_layers: \"fc\"", two_layers, false, errc::not_fusable, {1, 21}, false},
    {"asymmetric Conv3d through an override", "override_layer_types {\n  layer_type: \"Conv3d\"\n  calibration_config {\n    ifmr_quantize { asymmetric: true }\n  }\n}\n", four_layers, false, errc::unsupported_setting, {4, 33}, false},
    {"6-bit Linear through an override", "override_layer_configs {\n  layer_name: \"fc\"\n  calibration_config { arq_quantize { quant_bits: 6 } }\n}\n", two_layers, false, errc::unsupported_setting, {3, 51}, false},
    {"INT16 on a Linear without bias through an override", "override_layer_types {\n  layer_type: \"Linear\"\n  calibration_config { hfmg_quantize { dst_type: INT16 } }\n}\n", four_layers, false, errc::unsupported_setting, {3, 50}, false},
    {"channel_wise Linear through an override", "override_layer_types {\n  layer_type: \"Linear\"\n  calibration_config { arq_quantize { channel_wise: true } }\n}\n", two_layers, false, errc::unsupported_setting, {3, 53}, false},
    {"channel_wise Linear from common_config, strict", "common_config {\n  arq_quantize { channel_wise: true }\n}\n", two_layers, true, errc::unsupported_setting, {2, 32}, false},
    {"every layer skipped by type", "skip_layer_types: [\"Conv2d\", \"Linear\"]", two_layers, false, errc::nothing_to_quantize, {0, 0}, false},
    {"every layer skipped by name", "skip_layers: \"conv1\"\nskip_layers: \"fc\"\n", two_layers, false, errc::nothing_to_quantize, {0, 0}, false},
    {"layer list names a layer twice", "batch_num: 1", R"([{"name": "a", "type": "Conv2d"}, {"name": "a", "type": "Linear"}])", false, errc::bad_layer_list, {0, 0}, false},
    {"layer list entry with an empty name", "batch_num: 1", R"([{"name": "", "type": "Conv2d"}])", false, errc::bad_layer_list, {0, 0}, false},
    // W605 degradations: resolution succeeds with a warning.
    {"7-bit weights from common_config on a Linear", "common_config {\n  arq_quantize {\n    quant_bits: 7\n  }\n}\n", two_layers, false, errc::degraded_setting, {3, 17}, true},
    {"channel_wise from common_config on a Linear", "common_config {\n  arq_quantize { channel_wise: true }\n}\n", two_layers, false, errc::degraded_setting, {2, 32}, true},
    {"DMQ from common_config on an AvgPool2d", "common_config {\n  dmq_balancer { migration_strength: 0.4 }\n}\n", four_layers, false, errc::degraded_setting, {2, 3}, true},
    {"ADA from common_config on a Conv3d", "common_config { ada_quantize { } }", four_layers, false, errc::degraded_setting, {1, 17}, true},
};
// clang-format on

// ---------------------------------------------------------------------------------------------
// 6. The detailed JSON config (5xx, plus the JSON forms of E311 and E404).
// ---------------------------------------------------------------------------------------------
struct json_case {
  std::string_view name;
  std::string_view text;
  errc code;
  pos at;
  std::string_view message_part;
};

// clang-format off
const json_case json_cases[] = {
    {"truncated object", R"({"version": 1,)", errc::json_invalid, {1, 15}, "malformed JSON"},
    {"bad literal", R"({"a": tru})", errc::json_invalid, {1, 10}, "malformed JSON"},
    {"stray ] on line 3", "{\n  \"version\": 1,\n  ]\n}", errc::json_invalid, {3, 3}, "malformed JSON"},
    {"repeated key", R"({"version": 1, "version": 1})", errc::json_invalid, {0, 0}, "'version' appears twice"},
    {"repeated key whose objects repeat keys (fuzzer finding)", R"({"c1": {"a": 1}, "c1": {"p": {}, "p": {"q": [1, {"r": 2, "r": {}}]}}, "c2": 3})", errc::json_invalid, {0, 0}, "'c1' appears twice"},
    {"global key that is not a layer", R"({"version": 1, "foo": 3})", errc::json_unknown_key, {0, 0}, "'foo'"},
    {"unknown key in a layer", R"({"conv1": {"quant_enable": true, "activation_quant_params": {}, "bogus": 1}})", errc::json_unknown_key, {0, 0}, "'conv1.bogus': unknown key"},
    {"ADA key in an ARQ layer", R"({"conv1": {"activation_quant_params": {}, "weight_quant_params": {"channel_wise": true, "reg_param": 0.1}}})", errc::json_unknown_key, {0, 0}, "'reg_param' does not belong to arq_quantize"},
    {"not an object", "[1, 2]", errc::json_wrong_type, {0, 0}, "must be a JSON object"},
    {"version as a string", R"({"version": "1"})", errc::json_wrong_type, {0, 0}, "'version': must be a non-negative integer"},
    {"search_range of one number", R"({"conv1": {"activation_quant_params": {"search_range": [0.7]}}})", errc::json_wrong_type, {0, 0}, "must be a list of 2 numbers"},
    {"quant_enable as a number", R"({"conv1": {"quant_enable": 1, "activation_quant_params": {}}})", errc::json_wrong_type, {0, 0}, "must be true or false"},
    {"version 2", R"({"version": 2})", errc::json_value_out_of_range, {0, 0}, "version must be 1"},
    {"num_of_bins 100", R"({"conv1": {"activation_quant_params": {"act_algo": "hfmg", "num_of_bins": 100}}})", errc::json_value_out_of_range, {0, 0}, "must be 1024, 2048, 4096 or 8192"},
    {"IFMR and HFMG keys mixed", R"({"conv1": {"activation_quant_params": {"search_step": 0.01, "num_of_bins": 2048}}})", errc::json_value_out_of_range, {0, 0}, "IFMR and HFMG keys are mixed"},
    {"dmq_balancer_param 0.9", R"({"conv1": {"dmq_balancer_param": 0.9, "activation_quant_params": {}}})", errc::json_value_out_of_range, {0, 0}, "must be in [0.2, 0.8]"},
    {"float32 overflow (fuzzer finding)", R"({"conv1": {"activation_quant_params": {"search_range": [0.1, 1e39]}}})", errc::json_value_out_of_range, {0, 0}, "must be a finite number"},
    {"act num_bits 7", R"({"conv1": {"activation_quant_params": {"num_bits": 7}}})", errc::json_value_out_of_range, {0, 0}, "must be 4, 8 or 16"},
    {"layer without activation_quant_params", R"({"conv1": {"quant_enable": true}})", errc::json_missing_key, {0, 0}, "missing activation_quant_params"},
    {"weights without channel_wise", R"({"conv1": {"activation_quant_params": {}, "weight_quant_params": {"num_bits": 8}}})", errc::json_missing_key, {0, 0}, "missing channel_wise"},
    {"unknown fakequant_precision_mode", R"({"fakequant_precision_mode": "FP16", "conv1": {"activation_quant_params": {}}})", errc::fakequant_mode_invalid, {0, 0}, "must be \"DEFAULT\" or \"FORCE_FP16_QUANT\""},
    {"no layer enabled", R"({"conv1": {"quant_enable": false, "activation_quant_params": {}}})", errc::nothing_to_quantize, {0, 0}, "no layer has quant_enable: true"},
};
// clang-format on

// ---------------------------------------------------------------------------------------------
// 7. Layer lists (E405 from try_read_layer_list; no source position).
// ---------------------------------------------------------------------------------------------
struct layer_list_case {
  std::string_view text;
  std::string_view message_part;
};

// clang-format off
const layer_list_case layer_list_cases[] = {
    {"not json", "is not valid JSON"},
    {R"({"name": "a", "type": "Conv2d"})", "must be a JSON array"},
    {"[1]", "layer list entry 1 is not an object"},
    {R"([{"name": "a", "type": "Conv2d", "kind": 1}])", "unknown key 'kind'"},
    {R"([{"type": "Conv2d"}])", "needs a string \"name\""},
    {R"([{"name": "a"}])", "('a') needs a string \"type\""},
    {R"([{"name": "a", "type": "LSTM"}])", "which ptq does not calibrate"},
    {R"([{"name": "a", "type": "Linear", "bias": "yes"}])", "\"bias\" must be true or false"},
    {R"([{"name": "a", "type": "Conv2d", "in_channels": 0}])", "\"in_channels\" must be a positive integer"},
    {R"([{"name": "a", "type": "Conv2d"}, {"name": "b", "type": "Conv2d", "groups": -1}])", "layer list entry 2 ('b'): \"groups\" must be a positive integer"},
};
// clang-format on

// ---------------------------------------------------------------------------------------------
// 8. Record files (7xx from try_parse_record); positions point at the entry's `record`.
//    Layer shapes: conv1 (Cout 2, Cin 3), fc (Cout 4, Cin 8).
// ---------------------------------------------------------------------------------------------
struct record_case {
  std::string_view name;
  std::string_view text;
  errc code;
  pos at;
};

// clang-format off
const record_case record_cases[] = {
    {"offset_w not 0", "record {\n  key: \"conv1\"\n  value { scale_d: 0.01 offset_d: 3 scale_w: 0.5 offset_w: 1 }\n}\n", errc::record_value_invalid, {1, 1}},
    {"act_type INT2", "# result\nrecord {\n  key: \"fc\"\n  value { scale_d: 0.01 offset_d: 3 act_type: \"INT2\" }\n}\n", errc::record_value_invalid, {2, 1}},
    {"offset_d out of INT8 range", "record { key: \"fc\" value { scale_d: 0.01 offset_d: 128 } }", errc::record_value_invalid, {1, 1}},
    {"scale_w and offset_w lengths differ", "record {\n  key: \"conv1\"\n  value { scale_d: 0.01 offset_d: 3 scale_w: 0.5 scale_w: 0.25 offset_w: 0 }\n}\n", errc::record_length_mismatch, {1, 1}},
    {"scale_w neither 1 nor Cout", "record { key: \"fc\" value { scale_d: 0.01 offset_d: 0 scale_w: [1, 2] offset_w: [0, 0] } }", errc::record_length_mismatch, {1, 1}},
    {"key not in the model", "record { key: \"fc\" value { scale_d: 0.01 offset_d: 0 scale_w: 1 offset_w: 0 } }\n  record { key: \"conv9\" value { scale_d: 0.01 offset_d: 0 } }\n", errc::record_unknown_layer, {2, 3}},
    {"key twice", "record { key: \"fc\" value { scale_d: 0.01 offset_d: 3 scale_w: 1 offset_w: 0 } }\nrecord { key: \"fc\" value { scale_d: 0.02 offset_d: 3 } }\n", errc::record_duplicate_key, {2, 1}},
    {"scale_d missing", "record {\n  key: \"fc\"\n  value { offset_d: 3 }\n}\n", errc::record_missing_field, {1, 1}},
    {"entry without key", "record { value { scale_d: 0.01 offset_d: 3 } }", errc::record_missing_field, {1, 1}},
};
// clang-format on

std::vector<ptq::layer_info> layers_from(std::string_view json) {
  const auto r = ptq::try_read_layer_list(json);
  REQUIRE(r.ok());
  return r.value();
}

bool has_error(const std::vector<ptq::diagnostic>& diags) {
  for (const auto& d : diags) {
    if (ptq::is_error(d))
      return true;
  }
  return false;
}

}  // namespace

TEST_CASE("error corpus: parse errors carry the exact code and line:col", "[errors]") {
  for (const auto& c : parse_cases) {
    INFO("case: " << c.name << "\ntext: " << c.text);
    const auto r = ptq::try_parse_config(c.text);
    REQUIRE_FALSE(r.ok());
    const auto& d = r.error();
    CHECK(ptq::is_error(d));
    CHECK(code_text(d.code) == code_text(c.code));
    CHECK(pos_text(d.where.begin) == pos_text(c.at));
    CHECK_FALSE(d.message.empty());
  }
}

TEST_CASE("error corpus: parse errors do not depend on the float type", "[errors]") {
  for (const auto& c : parse_cases) {
    INFO("case: " << c.name);
    const auto r = ptq::try_parse_config<double>(c.text);
    REQUIRE_FALSE(r.ok());
    CHECK(code_text(r.error().code) == code_text(c.code));
    CHECK(pos_text(r.error().where.begin) == pos_text(c.at));
  }
}

TEST_CASE("error corpus: rendered messages", "[errors]") {
  for (const auto& c : render_cases) {
    INFO("text: " << c.text);
    const auto r = ptq::try_parse_config(c.text);
    REQUIRE_FALSE(r.ok());
    CHECK(ptq::format_diagnostic(r.error(), c.text, "cfg") == c.rendered);
  }
}

TEST_CASE("error corpus: rendered warnings, resolution and size errors", "[errors]") {
  SECTION("W601 string spanning lines") {
    const std::string_view text = "skip_layers: \"\nfc\n\"\n";
    const auto r = ptq::try_parse_config(text);
    REQUIRE(r.ok());
    REQUIRE(r.diagnostics().size() == 1);
    CHECK(ptq::format_diagnostic(r.diagnostics().front(), text, "cfg") ==
          "cfg:1:14: warning: string literal spans lines; read as \"fc\" (the toolkit's own reader "
          "rejects this) [W601]\n"
          " 1 | skip_layers: \"\n"
          "   |              ^\n"
          "note: write it on one line: skip_layers: \"fc\"\n");
  }
  SECTION("W603 oneof replaced") {
    const std::string_view text = "common_config { arq_quantize { } ada_quantize { } }";
    const auto r = ptq::try_parse_config(text);
    REQUIRE(r.ok());
    REQUIRE(r.diagnostics().size() == 1);
    CHECK(ptq::format_diagnostic(r.diagnostics().front(), text, "cfg") ==
          "cfg:1:34: warning: 'ada_quantize' replaces 'arq_quantize' set at 1:17; only one of them "
          "may be given, the last wins [W603]\n"
          " 1 | common_config { arq_quantize { } ada_quantize { } }\n"
          "   |                                  ^~~~~~~~~~~~\n");
  }
  SECTION("E401 unknown layer, rendered against the config text") {
    const std::string_view text = "skip_layers: \"conv9\"";
    const auto c = ptq::try_parse_config(text);
    REQUIRE(c.ok());
    const auto r = ptq::resolve_config(c.value(), layers_from(two_layers));
    REQUIRE_FALSE(r.ok());
    CHECK(ptq::format_diagnostic(r.error(), text, "cfg") ==
          "cfg:1:14: error: skip_layers names layer 'conv9', which is not in the model [E401]\n"
          " 1 | skip_layers: \"conv9\"\n"
          "   |              ^~~~~~~\n"
          "note: did you mean 'conv1'?\n");
  }
  SECTION("E404 has no position") {
    const std::string_view text = "skip_layer_types: \"Conv2d\"";
    const auto c = ptq::try_parse_config(text);
    REQUIRE(c.ok());
    const auto r = ptq::resolve_config(c.value(), layers_from(R"([{"name":"a","type":"Conv2d"}])"));
    REQUIRE_FALSE(r.ok());
    CHECK(ptq::format_diagnostic(r.error(), text, "cfg") ==
          "cfg: error: no layer is left to quantize: every layer is skipped by skip_layers or "
          "skip_layer_types [E404]\n");
  }
  SECTION("E105 input too large has no position") {
    ptq::parse_options opt;
    opt.limits.max_input_bytes = 16;
    const std::string_view text = "batch_num: 12345678";
    const auto r = ptq::try_parse_config(text, opt);
    REQUIRE_FALSE(r.ok());
    CHECK(ptq::format_diagnostic(r.error(), text, "cfg") ==
          "cfg: error: input is 19 bytes; the limit is 16 [E105]\n");
  }
  SECTION("E501 malformed JSON points at the failure") {
    const std::string_view text = R"({"a": tru})";
    const auto r = ptq::try_read_quant_config(text);
    REQUIRE_FALSE(r.ok());
    const std::string rendered = ptq::format_diagnostic(r.error(), text, "q.json");
    CHECK(rendered.rfind("q.json:1:10: error: malformed JSON: ", 0) == 0);
    CHECK(rendered.find(" [E501]\n 1 | {\"a\": tru}\n   |          ^\n") != std::string::npos);
  }
}

TEST_CASE("error corpus: warnings leave the parse successful", "[errors][warnings]") {
  for (const auto& c : warning_cases) {
    INFO("case: " << c.name << "\ntext: " << c.text);
    const auto r = ptq::try_parse_config(c.text);
    REQUIRE(r.ok());
    REQUIRE_FALSE(has_error(r.diagnostics()));
    bool found = false;
    for (const auto& d : r.diagnostics()) {
      if (d.code == c.code) {
        CHECK(d.level == ptq::severity::warning);
        CHECK(pos_text(d.where.begin) == pos_text(c.at));
        found = true;
        break;
      }
    }
    CHECK(found);
  }
}

TEST_CASE("error corpus: warning values", "[errors][warnings]") {
  {
    const auto r = ptq::try_parse_config("skip_layers: \"\nfc\n\"\n");
    REQUIRE(r.ok());
    REQUIRE(r->skip_layers.size() == 1);
    CHECK(r->skip_layers[0].value == "fc");
  }
  {
    const auto r = ptq::try_parse_config("batch_num: 1\nbatch_num: 2\n");
    REQUIRE(r.ok());
    CHECK(r->batch_num.value_or(0) == 2);
    CHECK(r.diagnostics().front().message.find("replaces the one at 1:12") != std::string::npos);
  }
  {
    const auto r =
        ptq::try_parse_config("common_config {\n  hfmg_quantize { }\n  ifmr_quantize { }\n}\n");
    REQUIRE(r.ok());
    CHECK(r->common_config->ifmr.has_value());
    CHECK_FALSE(r->common_config->hfmg.has_value());
  }
}

TEST_CASE("error corpus: resolution errors and degradations", "[errors][resolve]") {
  for (const auto& c : resolve_cases) {
    INFO("case: " << c.name << "\ntext: " << c.text);
    const auto parsed = ptq::try_parse_config(c.text);
    REQUIRE(parsed.ok());
    ptq::resolve_options opt;
    opt.strict_channel_wise = c.strict;
    const auto r = ptq::resolve_config(parsed.value(), layers_from(c.layers), opt);
    if (c.is_warning) {
      REQUIRE(r.ok());
      bool found = false;
      for (const auto& d : r.diagnostics()) {
        if (d.code == c.code && pos_text(d.where.begin) == pos_text(c.at)) {
          CHECK(d.level == ptq::severity::warning);
          found = true;
        }
      }
      CHECK(found);
    } else {
      REQUIRE_FALSE(r.ok());
      CHECK(code_text(r.error().code) == code_text(c.code));
      CHECK(pos_text(r.error().where.begin) == pos_text(c.at));
    }
  }
}

TEST_CASE("error corpus: detailed JSON config errors", "[errors][json]") {
  for (const auto& c : json_cases) {
    INFO("case: " << c.name << "\ntext: " << c.text);
    const auto r = ptq::try_read_quant_config(c.text);
    REQUIRE_FALSE(r.ok());
    const auto& d = r.error();
    CHECK(code_text(d.code) == code_text(c.code));
    CHECK(pos_text(d.where.begin) == pos_text(c.at));
    CHECK(d.message.find(c.message_part) != std::string::npos);
  }
}

TEST_CASE("error corpus: layer-list errors", "[errors][json]") {
  for (const auto& c : layer_list_cases) {
    INFO("text: " << c.text);
    const auto r = ptq::try_read_layer_list(c.text);
    REQUIRE_FALSE(r.ok());
    CHECK(code_text(r.error().code) == code_text(errc::bad_layer_list));
    CHECK_FALSE(r.error().where.known());
    CHECK(r.error().message.find(c.message_part) != std::string::npos);
  }
}

TEST_CASE("error corpus: record-file errors", "[errors][record]") {
  const std::vector<ptq::layer_info> shapes{channels("conv1", 2, 3), channels("fc", 4, 8)};
  for (const auto& c : record_cases) {
    INFO("case: " << c.name << "\ntext: " << c.text);
    const auto r = ptq::try_parse_record(c.text, &shapes);
    REQUIRE_FALSE(r.ok());
    CHECK(code_text(r.error().code) == code_text(c.code));
    CHECK(pos_text(r.error().where.begin) == pos_text(c.at));
  }
}

TEST_CASE("error corpus: bounded input", "[errors][limits]") {
  SECTION("nesting deeper than the default limit (64)") {
    std::string text;
    for (int i = 0; i < 65; ++i)
      text += "a{";
    for (int i = 0; i < 65; ++i)
      text += "}";
    const auto r = ptq::try_parse_config(text);
    REQUIRE_FALSE(r.ok());
    CHECK(code_text(r.error().code) == code_text(errc::nesting_too_deep));
    CHECK(pos_text(r.error().where.begin) == "1:130");  // the 65th '{'
  }
  SECTION("nesting at the default limit is not a depth error") {
    std::string text;
    for (int i = 0; i < 64; ++i)
      text += "a{";
    for (int i = 0; i < 64; ++i)
      text += "}";
    const auto r = ptq::try_parse_config(text);
    REQUIRE_FALSE(r.ok());
    CHECK(code_text(r.error().code) == code_text(errc::unknown_field));  // 'a' is unknown
  }
  SECTION("very deep nesting stays an error, not a stack overflow") {
    const std::string text = std::string(100000, '{');
    const auto r = ptq::try_parse_config(text);
    REQUIRE_FALSE(r.ok());
    CHECK(code_text(r.error().code) == code_text(errc::unexpected_token));
    std::string named;
    for (int i = 0; i < 50000; ++i)
      named += "a<";
    const auto r2 = ptq::try_parse_config(named);
    REQUIRE_FALSE(r2.ok());
    CHECK(code_text(r2.error().code) == code_text(errc::nesting_too_deep));
    CHECK(pos_text(r2.error().where.begin) == "1:130");
  }
  SECTION("custom depth limit") {
    ptq::parse_options opt;
    opt.limits.max_depth = 2;
    auto r = ptq::try_parse_config("a { b { c { } } }", opt);
    REQUIRE_FALSE(r.ok());
    CHECK(code_text(r.error().code) == code_text(errc::nesting_too_deep));
    CHECK(pos_text(r.error().where.begin) == "1:11");
    CHECK(r.error().message == "messages are nested deeper than 2 levels");
    opt.limits.max_depth = 1;
    r = ptq::try_parse_config("common_config < arq_quantize < > >", opt);
    REQUIRE_FALSE(r.ok());
    CHECK(code_text(r.error().code) == code_text(errc::nesting_too_deep));
    CHECK(pos_text(r.error().where.begin) == "1:30");
    opt.limits.max_depth = 2;
    CHECK(ptq::try_parse_config("common_config < arq_quantize < > >", opt).ok());
  }
  SECTION("a string longer than the default limit (64 KiB)") {
    const std::string text =
        "skip_layers: \"" + std::string((std::size_t{1} << 16) + 1, 'x') + "\"";
    const auto r = ptq::try_parse_config(text);
    REQUIRE_FALSE(r.ok());
    CHECK(code_text(r.error().code) == code_text(errc::string_too_long));
    CHECK(pos_text(r.error().where.begin) == "1:14");
    const std::string fits = "skip_layers: \"" + std::string(std::size_t{1} << 16, 'x') + "\"";
    CHECK(ptq::try_parse_config(fits).ok());
  }
  SECTION("custom string limit, counted after unescaping") {
    ptq::parse_options opt;
    opt.limits.max_string_bytes = 8;
    CHECK(ptq::try_parse_config("skip_layers: \"12345678\"", opt).ok());
    CHECK(ptq::try_parse_config("skip_layers: \"\\x41\\x42\\x43\\x44\\x45\\x46\\x47\\x48\"", opt)
              .ok());
    const auto r = ptq::try_parse_config("batch_num: 1\nskip_layers: \"123456789\"", opt);
    REQUIRE_FALSE(r.ok());
    CHECK(code_text(r.error().code) == code_text(errc::string_too_long));
    CHECK(pos_text(r.error().where.begin) == "2:14");
    CHECK(r.error().message == "string literal is longer than 8 bytes");
  }
  SECTION("input larger than max_input_bytes") {
    ptq::parse_options opt;
    opt.limits.max_input_bytes = 16;
    CHECK(ptq::try_parse_config("batch_num: 12345", opt).ok());  // exactly 16 bytes
    const auto r = ptq::try_parse_config("batch_num: 123456", opt);
    REQUIRE_FALSE(r.ok());
    CHECK(code_text(r.error().code) == code_text(errc::input_too_large));
    CHECK_FALSE(r.error().where.known());
    CHECK(r.error().message == "input is 17 bytes; the limit is 16");
  }
}

TEST_CASE("error corpus: size and coverage of the corpus", "[errors]") {
  const std::size_t entries = std::size(parse_cases) + std::size(warning_cases) +
                              std::size(resolve_cases) + std::size(json_cases) +
                              std::size(layer_list_cases) + std::size(record_cases);
  CHECK(entries >= 70);
  CHECK(std::size(render_cases) >= 12);

  std::set<unsigned> covered;
  for (const auto& c : parse_cases)
    covered.insert(static_cast<unsigned>(c.code));
  for (const auto& c : warning_cases)
    covered.insert(static_cast<unsigned>(c.code));
  for (const auto& c : resolve_cases)
    covered.insert(static_cast<unsigned>(c.code));
  for (const auto& c : json_cases)
    covered.insert(static_cast<unsigned>(c.code));
  for (const auto& c : record_cases)
    covered.insert(static_cast<unsigned>(c.code));
  covered.insert(static_cast<unsigned>(errc::bad_layer_list));   // layer_list_cases
  covered.insert(static_cast<unsigned>(errc::input_too_large));  // "bounded input"
  covered.insert(static_cast<unsigned>(errc::string_too_long));
  covered.insert(static_cast<unsigned>(errc::nesting_too_deep));

  // Every code of errc. dst_type_invalid (E310) is reserved: no reader emits it (a bad
  // dst_type is E205 in text; the JSON has no dst_type key). Keep this list in sync with
  // diagnostics.hpp and docs/errors.md.
  const errc all[] = {
      errc::unexpected_character,
      errc::unterminated_string,
      errc::bad_escape,
      errc::bad_number,
      errc::input_too_large,
      errc::string_too_long,
      errc::unexpected_token,
      errc::nesting_too_deep,
      errc::unexpected_end,
      errc::missing_colon,
      errc::unknown_field,
      errc::wrong_type,
      errc::missing_field,
      errc::value_does_not_fit,
      errc::unknown_enum_value,
      errc::not_repeated,
      errc::percentile_out_of_range,
      errc::search_range_invalid,
      errc::search_step_invalid,
      errc::num_of_bins_invalid,
      errc::migration_strength_out_of_range,
      errc::ada_param_out_of_range,
      errc::beta_range_invalid,
      errc::quant_bits_invalid,
      errc::batch_num_invalid,
      errc::dst_type_invalid,
      errc::fakequant_mode_invalid,
      errc::weight_offset_invalid,
      errc::legacy_fc_channel_wise,
      errc::duplicate_entry,
      errc::unknown_layer_type,
      errc::all_types_skipped,
      errc::unknown_layer,
      errc::not_fusable,
      errc::unsupported_setting,
      errc::nothing_to_quantize,
      errc::bad_layer_list,
      errc::json_invalid,
      errc::json_unknown_key,
      errc::json_wrong_type,
      errc::json_value_out_of_range,
      errc::json_missing_key,
      errc::string_spans_lines,
      errc::field_repeated,
      errc::oneof_replaced,
      errc::legacy_blocks_ignored,
      errc::degraded_setting,
      errc::record_value_invalid,
      errc::record_length_mismatch,
      errc::record_unknown_layer,
      errc::record_duplicate_key,
      errc::record_missing_field,
  };
  for (const auto code : all) {
    if (code == errc::dst_type_invalid)
      continue;
    INFO("code " << code_text(code) << " has no corpus entry");
    CHECK(covered.count(static_cast<unsigned>(code)) == 1);
  }
}
