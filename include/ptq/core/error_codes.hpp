// Every error and warning code of ptq: the X-macro table of names and numbers, the `errc` enum
// made from it and each code's name. ptq/core/error.hpp builds the error model on it; the docs
// test (tests/core/test_error_docs.cpp) walks the same table.
// Depends on: the standard library.
#pragma once

#include <cstdint>

#include "ptq/core/abi.hpp"

// Every code once: its name and its number. docs/errors.md lists each with an example and its
// fix; a number never changes meaning. Ranges: 1xx lexical, 11x syntax, 2xx schema, 3xx values,
// 4xx resolution, 5xx detailed JSON config, 6xx warnings, 7xx record files, 8xx sessions and
// manifests, 9xx numerics, 10xx files (.npy, safetensors, reading and writing), 11xx the tool,
// 1200-1249 export (errors 120x, the lossy-conversion warning 1220), 1250-1299 the ONNX QDQ
// exporter, 13xx the calibration report (make_report: errors 1301-1303), 1400-1449 serialized
// statistic states and sharded sessions (scale-out).
#define PTQ_ERROR_CODES(X)                \
  X(unexpected_character, 101)            \
  X(unterminated_string, 102)             \
  X(bad_escape, 103)                      \
  X(bad_number, 104)                      \
  X(input_too_large, 105)                 \
  X(string_too_long, 106)                 \
  X(unexpected_token, 110)                \
  X(nesting_too_deep, 111)                \
  X(unexpected_end, 112)                  \
  X(missing_colon, 113)                   \
  X(unknown_field, 201)                   \
  X(wrong_type, 202)                      \
  X(missing_field, 203)                   \
  X(value_does_not_fit, 204)              \
  X(unknown_enum_value, 205)              \
  X(not_repeated, 206)                    \
  X(percentile_out_of_range, 301)         \
  X(search_range_invalid, 302)            \
  X(search_step_invalid, 303)             \
  X(num_of_bins_invalid, 304)             \
  X(migration_strength_out_of_range, 305) \
  X(ada_param_out_of_range, 306)          \
  X(beta_range_invalid, 307)              \
  X(quant_bits_invalid, 308)              \
  X(batch_num_invalid, 309)               \
  X(dst_type_invalid, 310)                \
  X(fakequant_mode_invalid, 311)          \
  X(weight_offset_invalid, 312)           \
  X(legacy_fc_channel_wise, 313)          \
  X(duplicate_entry, 314)                 \
  X(unknown_layer_type, 315)              \
  X(all_types_skipped, 316)               \
  X(unknown_layer, 401)                   \
  X(not_fusable, 402)                     \
  X(unsupported_setting, 403)             \
  X(nothing_to_quantize, 404)             \
  X(bad_layer_list, 405)                  \
  X(json_invalid, 501)                    \
  X(json_unknown_key, 502)                \
  X(json_wrong_type, 503)                 \
  X(json_value_out_of_range, 504)         \
  X(json_missing_key, 505)                \
  X(string_spans_lines, 601)              \
  X(field_repeated, 602)                  \
  X(oneof_replaced, 603)                  \
  X(legacy_blocks_ignored, 604)           \
  X(degraded_setting, 605)                \
  X(fusion_skipped, 606)                  \
  X(lone_cr_line_end, 607)                \
  X(record_value_invalid, 701)            \
  X(record_length_mismatch, 702)          \
  X(record_unknown_layer, 703)            \
  X(record_duplicate_key, 704)            \
  X(record_missing_field, 705)            \
  X(session_layer_invalid, 801)           \
  X(session_call_invalid, 802)            \
  X(session_input_invalid, 803)           \
  X(manifest_invalid, 804)                \
  X(empty_tensor, 901)                    \
  X(non_finite, 902)                      \
  X(invalid_scale, 903)                   \
  X(invalid_argument, 904)                \
  X(shape_mismatch, 905)                  \
  X(out_of_range, 906)                    \
  X(no_data, 907)                         \
  X(empty_result, 908)                    \
  X(tensor_view_invalid, 909)             \
  X(file_open_failed, 1001)               \
  X(not_a_file, 1002)                     \
  X(file_too_large, 1003)                 \
  X(read_failed, 1004)                    \
  X(write_failed, 1005)                   \
  X(bad_magic, 1006)                      \
  X(bad_version, 1007)                    \
  X(bad_header, 1008)                     \
  X(unsupported_dtype, 1009)              \
  X(fortran_order, 1010)                  \
  X(truncated, 1011)                      \
  X(trailing_data, 1012)                  \
  X(tensor_not_found, 1013)               \
  X(bad_offsets, 1014)                    \
  X(output_conflict, 1101)                \
  X(output_not_writable, 1102)            \
  X(interrupted, 1103)                    \
  X(bundled_data_not_found, 1104)         \
  X(unknown_command, 1105)                \
  X(mpi_unavailable, 1106)                \
  X(input_ignored, 1107)                  \
  X(export_layer_unknown, 1201)           \
  X(export_value_invalid, 1202)           \
  X(export_shape_mismatch, 1203)          \
  X(export_not_representable, 1204)       \
  X(export_bias_overflow, 1205)           \
  X(export_needs_model, 1206)             \
  X(export_unknown_format, 1207)          \
  X(export_option_invalid, 1208)          \
  X(export_record_incomplete, 1209)       \
  X(export_lossy, 1220)                   \
  X(export_engine_caveat, 1221)           \
  X(onnx_unavailable, 1250)               \
  X(onnx_model_invalid, 1251)             \
  X(onnx_layer_unmatched, 1252)           \
  X(onnx_unsupported, 1253)               \
  X(onnx_fusion_unknown, 1254)            \
  X(onnx_dmq_divide, 1255)                \
  X(onnx_layer_float, 1256)               \
  X(report_session_incomplete, 1301)      \
  X(report_stats_missing, 1302)           \
  X(report_input_invalid, 1303)           \
  X(state_bad_magic, 1401)                \
  X(state_bad_version, 1402)              \
  X(state_truncated, 1403)                \
  X(state_checksum_mismatch, 1404)        \
  X(state_invalid, 1405)                  \
  X(state_mismatch, 1406)                 \
  X(shard_invalid, 1407)

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Stable error and warning codes, rendered as `[E<n>]` (errors) or `[W<n>]` (warnings).
enum class errc : std::uint16_t {
#define PTQ_ERRC_ENUMERATOR(name, number) name = (number),
  PTQ_ERROR_CODES(PTQ_ERRC_ENUMERATOR)
#undef PTQ_ERRC_ENUMERATOR
};

/// The code's name as written in the enum and in docs/errors.md, e.g. "non_finite".
[[nodiscard]] constexpr const char* to_string(errc c) noexcept {
  switch (c) {
#define PTQ_ERRC_NAME(name, number) \
  case errc::name:                  \
    return #name;
    PTQ_ERROR_CODES(PTQ_ERRC_NAME)
#undef PTQ_ERRC_NAME
  }
  return "unknown";
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
