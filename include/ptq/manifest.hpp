// The session layer plus the model manifest, the JSON list of layers that `ptq calibrate
// --model` reads (adds nlohmann_json). Its tensors come from e.g. ptq/io/safetensors.hpp.
#pragma once

#include "ptq/session.hpp"
#include "ptq/session/manifest.hpp"
