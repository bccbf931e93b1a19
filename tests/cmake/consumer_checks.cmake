# Shared assertions for the consumer projects (included after ptq was made available).

# The library targets must carry no build flags of ptq's own: no warnings, -Werror,
# sanitizers, -m<isa> or XTENSOR_USE_XSIMD. The one definition each compiled part gives its
# users says that it is linked.
set(ptq_allowed_definitions_ptq::kernels "PTQ_KERNELS_DISPATCHED=1")
set(ptq_allowed_definitions_ptq::session "PTQ_SESSION_COMPILED=1")
foreach(t ptq::ptq ptq::kernels ptq::session)
  if(NOT TARGET ${t})
    message(FATAL_ERROR "${t} is missing")
  endif()
  foreach(prop INTERFACE_COMPILE_OPTIONS INTERFACE_LINK_OPTIONS INTERFACE_COMPILE_DEFINITIONS)
    get_target_property(value ${t} ${prop})
    if(value AND NOT (prop STREQUAL "INTERFACE_COMPILE_DEFINITIONS"
                      AND value STREQUAL "${ptq_allowed_definitions_${t}}"))
      message(FATAL_ERROR "${t} leaks ${prop}: ${value}")
    endif()
  endforeach()
endforeach()

# None of ptq's own targets may exist in the consumer.
foreach(t ptq_cli ptq_package_tests ptq_config_tests ptq_core_tests ptq_header_check
          ptq_example_minimal ptq::ptq_cli)
  if(TARGET ${t})
    message(FATAL_ERROR "ptq target ${t} leaked into the consumer")
  endif()
endforeach()

add_executable(ptq_consumer "${PTQ_CONSUMER_MAIN}")
target_link_libraries(ptq_consumer PRIVATE ptq::ptq)
target_compile_definitions(ptq_consumer PRIVATE PTQ_EXPECTED_VERSION="${PTQ_EXPECTED_VERSION}"
                                                   PTQ_EXPECTED_KERNELS="${PTQ_EXPECTED_KERNELS}")
# The consumer's own strict flags: ptq's headers must come in as SYSTEM so they cannot trip them.
target_compile_options(ptq_consumer PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                                            -Werror)
