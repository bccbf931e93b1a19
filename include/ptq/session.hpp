// The session layer: layer descriptions, the calibration session, the record file (proto text
// and JSON). Adds xtensor/xsimd (through the numerics) and nlohmann_json (record JSON).
#pragma once

#include "ptq/session/layer.hpp"
#include "ptq/session/record.hpp"
#include "ptq/session/record_json.hpp"
#include "ptq/session/session.hpp"
