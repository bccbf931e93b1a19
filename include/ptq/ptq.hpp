// Everything ptq offers. Include a layer's own umbrella to pay only for what you use:
//   ptq/config.hpp       configs: parse, check, resolve, write (standard library only)
//   ptq/config_json.hpp  + the detailed JSON config (nlohmann_json)
//   ptq/core.hpp, ptq/kernels.hpp, ptq/algorithms.hpp   the numerics (xsimd)
//   ptq/session.hpp      the calibration session and the record file
//   ptq/record_json.hpp  + the record as JSON (nlohmann_json)
//   ptq/manifest.hpp     + the model manifest (nlohmann_json)
//   ptq/report.hpp       + the calibration report: HTML page and JSON (nlohmann_json)
//   ptq/io.hpp           .npy, safetensors, atomic writes
//   ptq/export.hpp       + the exporters: QDQ table, TensorRT, ncnn, AIMET, AMCT deploy
#pragma once

#include "ptq/algorithms.hpp"
#include "ptq/config.hpp"
#include "ptq/config_json.hpp"
#include "ptq/core.hpp"
#include "ptq/export.hpp"
#include "ptq/io.hpp"
#include "ptq/kernels.hpp"
#include "ptq/manifest.hpp"
#include "ptq/record_json.hpp"
#include "ptq/report.hpp"
#include "ptq/session.hpp"
#include "ptq/version.hpp"
