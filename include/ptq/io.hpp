// ptq io: .npy reading and writing. Standard library only.
#pragma once

#include "ptq/io/atomic_file.hpp"
#include "ptq/io/manifest.hpp"
#include "ptq/io/npy.hpp"
#include "ptq/io/safetensors.hpp"
