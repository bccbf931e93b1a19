// The config layer plus the detailed JSON config (adds nlohmann_json).
#pragma once

#include "ptq/config.hpp"
#include "ptq/config/layer_json.hpp"
