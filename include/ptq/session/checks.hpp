// The session's checks of what an engine hands it: a layer description (at creation, E801) and
// an input tensor of a layer (at every feed, E803), each message naming the layer.
// Depends on: core and algorithms.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ptq/algorithms/layer/conv_bn_fusion.hpp"
#include "ptq/algorithms/layer/tensor.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"
#include "ptq/session/layer.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// The input rank a layer type takes ([N, C, spatial...]); 0 for Linear, whose channels are the
/// last axis of an input of any rank.
[[nodiscard]] constexpr std::size_t input_rank(layer_type t) noexcept {
  switch (t) {
    case layer_type::conv1d:
    case layer_type::conv_transpose1d:
      return 3;
    case layer_type::conv2d:
    case layer_type::conv_transpose2d:
    case layer_type::avg_pool2d:
      return 4;
    case layer_type::conv3d:
      return 5;
    case layer_type::linear:
      return 0;
  }
  return 0;
}

/// Checks a layer description against its type (E801, naming the layer): the weight's rank and
/// channel geometry, padding_mode, the bias length, a BatchNorm only after a fusable type.
[[nodiscard]] inline result<> check_layer_desc(const layer_desc& l) {
  const std::string at = "layer '" + l.name + "': ";
  const auto fail = [](std::string message) {
    return make_error(errc::session_layer_invalid, std::move(message));
  };
  if (l.type == layer_type::avg_pool2d)
    return {};
  if (auto g = output_channels(l.weight.shape, l.type, l.conv.groups, l.name + ".weight"); !g)
    return fail(at + g.error().message);
  if (l.conv.padding_mode != "zeros") {
    return fail(at + "padding_mode '" + l.conv.padding_mode +
                "' is not quantized by the toolkit (only 'zeros')");
  }
  const auto cout = layer_output_channels(l);
  if (l.bias && l.bias->size() != cout) {
    return fail(at + "bias has " + std::to_string(l.bias->size()) + " values; Cout is " +
                std::to_string(cout));
  }
  if (l.batch_norm && !supports_bn_fusion(l.type)) {
    return fail(at + "a BatchNorm after a " + std::string(to_string(l.type)) +
                " is not fused by the toolkit; run it in the engine and leave batch_norm empty");
  }
  return {};
}

namespace detail {

/// How messages name an input tensor of layer `l`: "<layer> input" for an unnamed tensor
/// (tensor_view's default "tensor"), else the tensor's own name, which is where the engine
/// can say which file or batch it came from ("conv1 input (batch0.safetensors)"); a name that
/// does not start with the layer's gets "<layer> input (...)" around it, so the layer is
/// always named.
[[nodiscard]] inline std::string input_name(const layer_desc& l, const tensor_view& x) {
  if (x.name.empty() || x.name == "tensor")
    return l.name + " input";
  const bool named = x.name.size() > l.name.size() &&
                     x.name.compare(0, l.name.size(), l.name) == 0 && x.name[l.name.size()] == ' ';
  return named ? x.name : l.name + " input (" + x.name + ")";
}

}  // namespace detail

/// Checks an input tensor of layer `l` (E803, naming the layer, the tensor and the shape): the
/// rank of the layer type ([N, C, ...]; Linear: any rank >= 1), not empty (E901, as every
/// observer says it), a view that can be read (E909), and the layer's input channels on axis 1
/// (Linear: the last axis).
[[nodiscard]] inline result<> check_layer_input(const layer_desc& l, const tensor_view& x) {
  const std::string at = detail::input_name(l, x) + " " + shape_string(x.shape) + ": ";
  const auto fail = [&](const std::string& what) {
    return make_error(errc::session_input_invalid, at + what);
  };
  const std::size_t rank = input_rank(l.type);
  if (rank == 0 && x.shape.empty())
    return fail("a " + std::string(to_string(l.type)) + " takes an input of rank 1 or more");
  if (rank != 0 && x.shape.size() != rank) {
    return fail("a " + std::string(to_string(l.type)) + " takes a rank-" + std::to_string(rank) +
                " input [N, C" +
                (rank == 3   ? ", L"
                 : rank == 4 ? ", H, W"
                             : ", D, H, W") +
                "], got rank " + std::to_string(x.shape.size()));
  }
  if (x.size() == 0)  // E901, as every observer says it: one code per condition
    return make_error(errc::empty_tensor, at + "empty tensor");
  if (const std::string problem = tensor_view_problem(x); !problem.empty())
    return make_error(errc::tensor_view_invalid, at + problem);
  if (l.type == layer_type::avg_pool2d)
    return {};
  const std::size_t cin = layer_input_channels(l);
  const bool last = l.type == layer_type::linear;
  const std::size_t got = last ? x.shape.back() : x.shape[1];
  if (got != cin) {
    return fail("has " + std::to_string(got) + " input channels (axis " + (last ? "-1" : "1") +
                "); the layer takes " + std::to_string(cin));
  }
  return {};
}

namespace detail {

/// `e` with its message naming layer `name` (prefixed "layer 'name': " unless it already
/// starts with the layer's name or a tensor of it).
[[nodiscard]] inline error in_layer(std::string_view name, error e) {
  const std::string_view m = e.message;
  const bool named = m.size() > name.size() && m.compare(0, name.size(), name) == 0 &&
                     (m[name.size()] == ' ' || m[name.size()] == '.' || m[name.size()] == ':');
  if (!named && m.rfind("layer '", 0) != 0)
    e.message = "layer '" + std::string(name) + "': " + e.message;
  return e;
}

}  // namespace detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
