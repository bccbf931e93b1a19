// One layer's entry of the toolkit's record (`SingleLayerRecord`): a plain aggregate of standard
// types, here at the bottom so that the policy path (layer_calibrator) builds one without the
// record file's reader and writer (ptq/session/record.hpp).
// Depends on: the standard library.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// `SingleLayerRecord`: one layer's calibration result.
struct layer_record {
  std::optional<float> scale_d;
  std::optional<std::int32_t> offset_d;
  std::vector<float> scale_w;
  std::vector<std::int32_t> offset_w;
  std::vector<std::uint32_t> shift_bit;  ///< reserved; read and written back, never produced
  std::vector<float> tensor_balance_factor;
  std::optional<bool> skip_fusion;
  std::optional<std::string> dst_type;
  std::optional<std::string> act_type;
  std::optional<std::string> wts_type;
  std::optional<std::string> fakequant_precision_mode;
  friend bool operator==(const layer_record& a, const layer_record& b) {
    return a.scale_d == b.scale_d && a.offset_d == b.offset_d && a.scale_w == b.scale_w &&
           a.offset_w == b.offset_w && a.shift_bit == b.shift_bit &&
           a.tensor_balance_factor == b.tensor_balance_factor && a.skip_fusion == b.skip_fusion &&
           a.dst_type == b.dst_type && a.act_type == b.act_type && a.wts_type == b.wts_type &&
           a.fakequant_precision_mode == b.fakequant_precision_mode;
  }
  friend bool operator!=(const layer_record& a, const layer_record& b) { return !(a == b); }
};

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
