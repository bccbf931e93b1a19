// The config layer: parse, check, resolve and write simple configs. Standard library and
// POSIX only (config files are read with open/fstat/read).
// Add <ptq/config_json.hpp> for the detailed JSON config (needs nlohmann_json).
#pragma once

#include "ptq/config/api.hpp"
#include "ptq/config/layer_types.hpp"
#include "ptq/config/model.hpp"
#include "ptq/config/parser.hpp"
#include "ptq/config/resolve.hpp"
#include "ptq/config/validate.hpp"
#include "ptq/config/writer.hpp"
#include "ptq/prototext/diagnostics.hpp"
#include "ptq/prototext/lexer.hpp"
#include "ptq/prototext/text_tree.hpp"
#include "ptq/version.hpp"
