// ptq algorithms: ARQ, ADA (AdaRound and its layer arithmetic), IFMR and HFMG observers, the DMQ
// balancer, the ConvTranspose channel geometry, the compile-time policies and the layer
// calibrator, and the runtime dispatcher. Depends on core, kernels, config (resolved layers);
// no xtensor.
#pragma once

#include "ptq/algorithms/activation.hpp"
#include "ptq/algorithms/activation_fn.hpp"
#include "ptq/algorithms/activation_observer.hpp"
#include "ptq/algorithms/ada.hpp"
#include "ptq/algorithms/ada_kl.hpp"
#include "ptq/algorithms/arq.hpp"
#include "ptq/algorithms/conv_bn_fusion.hpp"
#include "ptq/algorithms/dmq.hpp"
#include "ptq/algorithms/gemm_tasks.hpp"
#include "ptq/algorithms/hfmg.hpp"
#include "ptq/algorithms/hfmg_two_pass.hpp"
#include "ptq/algorithms/ifmr.hpp"
#include "ptq/algorithms/ifmr_two_pass.hpp"
#include "ptq/algorithms/ifmr_wire.hpp"
#include "ptq/algorithms/invariant_histogram.hpp"
#include "ptq/algorithms/layer_calibrator.hpp"
#include "ptq/algorithms/layer_compute.hpp"
#include "ptq/algorithms/policies.hpp"
#include "ptq/algorithms/stat_states.hpp"
#include "ptq/algorithms/state_wire.hpp"
#include "ptq/algorithms/stored_batch.hpp"
#include "ptq/algorithms/tensor.hpp"
#include "ptq/algorithms/two_pass_exchange.hpp"
#include "ptq/algorithms/two_pass_observer.hpp"
#include "ptq/core.hpp"
#include "ptq/kernels.hpp"
