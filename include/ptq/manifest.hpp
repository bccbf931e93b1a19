// The session layer plus the model manifest, the JSON list of layers that `ptq calibrate
// --model` reads (adds nlohmann_json), and the fake-quantized weight export that follows it. Its
// tensors come from e.g. ptq/io/safetensors.hpp.
#pragma once

#include "ptq/session.hpp"
#include "ptq/session/fake_quant_weights.hpp"
#include "ptq/session/model_manifest.hpp"
