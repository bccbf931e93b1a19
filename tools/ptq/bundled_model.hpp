// The bundled digits model and its data: the model manifest with its weights, the calibration
// and test images and the test labels (examples/digits). ptq::forward_sequential runs it
// (ptq/session/sequential_forward.hpp); bundled_calibration.hpp drives the calibration session
// through its phases with it.
#pragma once

#include <vector>

#include "ptq/io/safetensors.hpp"
#include "ptq/session/model_manifest.hpp"
#include "ptq/session/sequential_forward.hpp"

namespace ptq_cli {

/// The bundled model and its data.
struct bundled_model {
  ptq::model_manifest model;
  ptq::io::safetensors_file weights;
  ptq::io::float_tensor calib;  ///< calibration images
  ptq::io::float_tensor test;   ///< test images
  std::vector<float> test_labels;
};

}  // namespace ptq_cli
