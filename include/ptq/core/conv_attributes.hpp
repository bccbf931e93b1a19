// A convolution's hyper-parameters as PyTorch names them, in its list form: the one description
// of a conv's geometry that the model manifest, the session, the exporters and (through
// layer_geometry) the layer arithmetic share.
// Depends on: the standard library.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Convolution attributes (PyTorch names; empty vectors mean stride 1, padding 0, dilation 1,
/// output padding 0; one value applies to every spatial axis).
struct conv_attributes {
  std::vector<std::size_t> stride;
  std::vector<std::size_t> padding;
  std::vector<std::size_t> dilation;
  std::vector<std::size_t> output_padding;  ///< ConvTranspose only
  std::size_t groups = 1;
  std::string padding_mode = "zeros";  ///< the toolkit quantizes only "zeros"
};

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
