// The session layer plus the record as JSON (adds nlohmann_json).
#pragma once

#include "ptq/session.hpp"
#include "ptq/session/record_json_io.hpp"
