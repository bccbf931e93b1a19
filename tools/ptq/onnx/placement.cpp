// The fused placement's demands (placement.hpp).
#include "placement.hpp"

#include <algorithm>
#include <cmath>
#include <deque>

namespace ptq_cli::onnx_tool {

namespace {

/// Ops whose output codes are their input's codes moved or dropped (the engine runs them on
/// int8 values, or removes the Q/DQ pair around them).
[[nodiscard]] bool keeps_codes(const std::string& op) {
  static const std::set<std::string> ops = {"Relu",    "Clip",      "MaxPool",
                                            "Flatten", "Reshape",   "Transpose",
                                            "Squeeze", "Unsqueeze", "Identity"};
  return ops.count(op) != 0;
}

/// A Pad that adds codes of the grid: a constant pad of 0 (0 is on every grid) or a copy of
/// edge or reflected values.
[[nodiscard]] bool pads_with_grid_values(const graph_view& v, const onnx::NodeProto& n) {
  if (n.op_type() != "Pad")
    return false;
  const auto* mode = find_attribute(n, "mode");
  if (mode != nullptr && mode->s() != "constant")
    return true;
  if (n.input_size() < 3 || n.input(2).empty())
    return true;  // the default constant is 0
  const auto* c = v.constant(n.input(2));
  if (c == nullptr)
    return false;
  auto value = float_values(*c, "");
  return value && value->data.size() == 1 && value->data[0] == 0.0f;
}

/// How many values an averaging node takes the mean of (0: not an averaging node, or the
/// window is unknown).
[[nodiscard]] std::int64_t averaged_values(const onnx::NodeProto& n, const tensor_shapes& shapes) {
  std::int64_t window = 1;
  if (n.op_type() == "AveragePool") {
    const auto* k = find_attribute(n, "kernel_shape");
    if (k == nullptr)
      return 0;
    for (const auto d : k->ints())
      window *= d;
    return window;
  }
  if (n.op_type() != "GlobalAveragePool")
    return 0;
  const auto it = shapes.find(n.input(0));
  if (it == shapes.end() || it->second.size() < 3)
    return 0;
  for (std::size_t d = 2; d < it->second.size(); ++d) {
    if (it->second[d] <= 0)
      return 0;
    window *= it->second[d];
  }
  return window;
}

/// The largest of a Div's constant divisors when they are all finite and positive; 0 else.
[[nodiscard]] float largest_divisor(const graph_view& v, const onnx::NodeProto& div) {
  if (div.input_size() != 2)
    return 0.0f;
  const auto* c = v.constant(div.input(1));
  if (c == nullptr)
    return 0.0f;
  auto values = float_values(*c, "");
  if (!values || values->data.empty())
    return 0.0f;
  float top = 0.0f;
  for (const float b : values->data) {
    if (!(b > 0.0f) || !std::isfinite(b))
      return 0.0f;
    top = std::max(top, b);
  }
  return top;
}

/// The symmetric grid (zero point at the middle code) that holds the range of `p`: an addend
/// can be negative where the sum's grid (after a ReLU, say) starts at 0.
[[nodiscard]] qdq_params symmetric_cover(const qdq_params& p) {
  const std::int32_t mid = p.is_unsigned ? 128 : 0;
  if (p.zero_point == mid)
    return p;
  const float lo = static_cast<float>(p.qmin() - p.zero_point) * p.scale;
  const float hi = static_cast<float>(p.qmin() + 255 - p.zero_point) * p.scale;
  qdq_params s = p;
  s.zero_point = mid;
  s.scale = std::max(-lo, hi) / 127.0f;
  return s;
}

/// Whether `x` may be quantized for `reader` alone: it is read by nothing else.
[[nodiscard]] bool only_reader(const graph_view& v, const std::string& x) {
  return v.consumers(x).size() == 1 && !v.is_graph_output(x) && !v.is_graph_input(x) &&
         v.constant(x) == nullptr;
}

}  // namespace

void add_fusion_demands(const graph_view& view, const std::set<int>& layer_nodes,
                        const tensor_shapes& shapes, demand_map& demands) {
  std::deque<std::string> queue;
  for (const auto& [tensor, list] : demands)
    queue.push_back(tensor);
  const auto derive = [&](const std::string& x, const qdq_params& p, int reader) {
    if (!only_reader(view, x) || demands.count(x))
      return;
    demands[x].push_back({p, reader, false});
    queue.push_back(x);
  };
  while (!queue.empty()) {
    const std::string t = queue.front();
    queue.pop_front();
    const int u = view.producer(t);
    if (u < 0 || layer_nodes.count(u))
      continue;  // a graph input, or a quantized layer: its output is quantized here
    const qdq_params p = demands.at(t).front().params;
    const auto& n = view.node(u);
    const std::string& op = n.op_type();
    if (n.input_size() == 0 || n.output_size() != 1)
      continue;
    if (keeps_codes(op) || pads_with_grid_values(view, n)) {
      derive(n.input(0), p, u);
    } else if (const auto window = averaged_values(n, shapes); window > 0) {
      qdq_params wider = p;
      wider.scale = p.scale * std::sqrt(static_cast<float>(window));
      derive(n.input(0), wider, u);
    } else if (op == "Div") {
      if (const float top = largest_divisor(view, n); top > 0.0f) {
        qdq_params scaled = p;
        scaled.scale = p.scale * top;
        derive(n.input(0), scaled, u);
      }
    } else if (op == "Add") {
      for (const auto& x : n.input()) {
        if (view.constant(x) == nullptr)
          derive(x, symmetric_cover(p), u);
      }
    }
  }
}

}  // namespace ptq_cli::onnx_tool
