// ptq io: .npy reading and writing. Standard library only.
#pragma once

#include "ptq/io/npy.hpp"
