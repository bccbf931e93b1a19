// The calibration report (docs/report.md): its data (ptq/report/report_data.hpp), the HTML page and
// the JSON form. Adds nlohmann_json (the JSON writer), like ptq/record_json.hpp.
#pragma once

#include "ptq/report/auto_calibrate.hpp"
#include "ptq/report/html.hpp"
#include "ptq/report/report_data.hpp"
#include "ptq/report/report_json.hpp"
#include "ptq/session.hpp"
