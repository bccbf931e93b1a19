// The detailed per-layer JSON config (docs/config.md) with nlohmann_json: writing it in the
// toolkit's exact layout, reading it with the JSON rules (docs/errors.md, 5xx), and the layer
// list.
// Depends on: the standard library.
#pragma once

#include "ptq/config/json_reader.hpp"
#include "ptq/config/json_writer.hpp"
#include "ptq/config/layer_list.hpp"
