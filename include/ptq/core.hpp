// ptq core: the n-bit grid, quant_params, the min/max kernel, process_scale, FP16 scale rounding,
// the tensor view (float32, float16, bfloat16; any strides) and the numeric error type. Standard
// library only.
#pragma once

#include "ptq/core/error.hpp"
#include "ptq/core/error_codes.hpp"
#include "ptq/core/fp16.hpp"
#include "ptq/core/hfmg_bins.hpp"
#include "ptq/core/layer_record.hpp"
#include "ptq/core/quant.hpp"
#include "ptq/core/shard_reduce.hpp"
#include "ptq/core/tensor_view.hpp"
#include "ptq/core/wire.hpp"
