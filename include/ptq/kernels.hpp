// ptq kernels: xsimd kernels templated on the arch, each beside the scalar reference that
// defines it, plus the kernel_set table used for runtime dispatch. Depends on core and xsimd.
#pragma once

#include "ptq/core.hpp"
#include "ptq/kernels/gemm.hpp"
#include "ptq/kernels/hfmg_loss.hpp"
#include "ptq/kernels/histogram.hpp"
#include "ptq/kernels/kernel_set.hpp"
#include "ptq/kernels/minmax.hpp"
#include "ptq/kernels/mse.hpp"
#include "ptq/kernels/quantize.hpp"
#include "ptq/kernels/simd_support.hpp"
#include "ptq/kernels/topk.hpp"
