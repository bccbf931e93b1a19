// The session layer: layer descriptions, the calibration session, the record file (proto text),
// the file-driven phase loop (calibrate_from_files).
// Adds xsimd (through the numerics). The JSON forms are opt-in, as ptq/config_json.hpp
// is, because they add nlohmann_json: ptq/record_json.hpp (the record as JSON) and
// ptq/manifest.hpp (the model manifest of `ptq calibrate --model`).
#pragma once

#include "ptq/session/calibrate_files.hpp"
#include "ptq/session/calibration_session.hpp"
#include "ptq/session/layer.hpp"
#include "ptq/session/record.hpp"
#include "ptq/session/shard_exchange.hpp"
