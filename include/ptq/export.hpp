// The exporters (opt-in, like ptq/manifest.hpp): the session layer, the model manifest, the
// format-agnostic QDQ table and every format written from it (TensorRT cache, ncnn table, AIMET
// encodings, AMCT deploy numbers, qdq-json). Adds nlohmann_json. docs/export.md.
#pragma once

#include "ptq/export/formats.hpp"
#include "ptq/export/qdq_table_from_manifest.hpp"
#include "ptq/manifest.hpp"
