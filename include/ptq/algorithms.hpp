// ptq algorithms: ARQ, ADA (AdaRound and its layer arithmetic), IFMR and HFMG observers, the DMQ
// balancer, the ConvTranspose channel geometry, the compile-time policies and the layer
// calibrator, the observers chosen at run time, and the two-pass states. Depends on core,
// kernels, config (the plan types); no xtensor.
#pragma once

#include "ptq/algorithms/activation_observer.hpp"
#include "ptq/algorithms/activations/activation.hpp"
#include "ptq/algorithms/activations/dmq.hpp"
#include "ptq/algorithms/activations/hfmg.hpp"
#include "ptq/algorithms/activations/ifmr.hpp"
#include "ptq/algorithms/activations/invariant_histogram.hpp"
#include "ptq/algorithms/activations/view_blocks.hpp"
#include "ptq/algorithms/layer/activation_fn.hpp"
#include "ptq/algorithms/layer/conv_bn_fusion.hpp"
#include "ptq/algorithms/layer/gemm_tasks.hpp"
#include "ptq/algorithms/layer/layer_compute.hpp"
#include "ptq/algorithms/layer/tensor.hpp"
#include "ptq/algorithms/layer_calibrator.hpp"
#include "ptq/algorithms/policies.hpp"
#include "ptq/algorithms/scale_out/hfmg_two_pass.hpp"
#include "ptq/algorithms/scale_out/ifmr_two_pass.hpp"
#include "ptq/algorithms/scale_out/ifmr_wire.hpp"
#include "ptq/algorithms/scale_out/stat_states.hpp"
#include "ptq/algorithms/scale_out/state_wire.hpp"
#include "ptq/algorithms/scale_out/two_pass_exchange.hpp"
#include "ptq/algorithms/scale_out/two_pass_observer.hpp"
#include "ptq/algorithms/weights/ada.hpp"
#include "ptq/algorithms/weights/ada_kl.hpp"
#include "ptq/algorithms/weights/arq.hpp"
#include "ptq/core.hpp"
#include "ptq/kernels.hpp"
