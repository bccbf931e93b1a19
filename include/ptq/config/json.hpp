// The detailed per-layer JSON config (spec §4.4) with nlohmann_json: writing it in the toolkit's
// exact layout, reading it with the JSON rules of spec §4.5, and the layer list.
#pragma once

#include "ptq/config/json_reader.hpp"
#include "ptq/config/json_writer.hpp"
#include "ptq/config/layer_list.hpp"
