// The one definition of calibration_session's phase calls, and of the float config parser
// every session user calls, for the programs that link `ptq::session` (CMake's `ptq::ptq`
// does): a TU that uses the session then compiles only their declarations
// (docs/architecture.md, "Compile time").
#define PTQ_SESSION_INLINE  // external definitions, here alone
#include "ptq/config/parser.hpp"
#include "ptq/session/calibration_session_impl.hpp"

template ptq::result<ptq::amct_config> ptq::try_parse_config<float>(std::string_view,
                                                                    ptq::parse_options);
