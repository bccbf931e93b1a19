// Where the fused QDQ placement quantizes (qdq.hpp): every quantized layer's input is
// quantized with its own scale_d and zero point (a calibrated demand); from each such tensor
// the demand goes back through the ops an int8 engine runs on quantized values or removes
// (ReLU, Clip, MaxPool, Flatten, Reshape, Transpose, Squeeze, Unsqueeze, Identity, a Pad of
// zeros or copied values: the same codes; AveragePool, GlobalAveragePool: the input on a grid
// sqrt(window) times as coarse, as a value averaged with its neighbours is larger than their mean,
// and rounding errors average out by about as much; a Div by positive constants, the DMQ Div: the
// grid scaled by the largest factor; Add: its inputs on the symmetric grid that holds the sum's
// range, as an addend may be negative where the sum is not) to the node that produces it, whose
// output is then quantized too. Quantizing before a ReLU gives the codes quantizing after it would
// (rounding is monotonic and 0 is on the grid); an engine that finds the ReLU redundant (a grid
// whose lowest code is its zero point) drops it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph.hpp"

namespace ptq_cli::onnx_tool {

/// One activation grid: q = clamp(round(x / scale) + zero_point, qmin, qmax).
struct qdq_params {
  float scale = 1.0f;
  std::int32_t zero_point = 0;
  bool is_unsigned = false;  ///< uint8 (qmin 0), else int8 (qmin -128)
  [[nodiscard]] std::int32_t qmin() const noexcept { return is_unsigned ? 0 : -128; }
  [[nodiscard]] bool operator==(const qdq_params& o) const noexcept {
    return scale == o.scale && zero_point == o.zero_point && is_unsigned == o.is_unsigned;
  }
};

/// A tensor to quantize for one reader (`consumer`, a node index of the view's graph).
struct qdq_demand {
  qdq_params params;
  int consumer = -1;
  bool calibrated = true;  ///< a layer's own scale_d; false: derived for an engine's fusion
};

using demand_map = std::map<std::string, std::vector<qdq_demand>>;

/// Adds the derived demands of the fused placement to `demands` (which holds the layers'
/// calibrated ones). `layer_nodes`: the quantized layers' nodes, where the walk back stops.
void add_fusion_demands(const graph_view& view, const std::set<int>& layer_nodes,
                        const tensor_shapes& shapes, demand_map& demands);

}  // namespace ptq_cli::onnx_tool
