// ptq io: .npy and safetensors reading and writing, atomic writes. Knows nothing of layers (the
// manifest sits with the session: ptq/manifest.hpp). Standard library; safetensors adds
// nlohmann_json.
#pragma once

#include "ptq/io/atomic_file.hpp"
#include "ptq/io/npy.hpp"
#include "ptq/io/npy_map.hpp"
#include "ptq/io/safetensors.hpp"
