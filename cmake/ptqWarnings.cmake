# ptqWarnings.cmake — compile settings for ptq's OWN targets (tests, tools, examples,
# benchmarks, fuzzers). Nothing here is ever put on the `ptq` INTERFACE target, so consumers
# never inherit our warnings, -Werror, sanitizers or ISA flags.
#
# ptq_target_warnings(<target> [NO_SANITIZE])
#   Adds -Wall -Wextra -Wpedantic -Wshadow -Wconversion (GCC and Clang), plus -Werror when
#   PTQ_WERROR is ON. When PTQ_SANITIZE is a non-empty list of sanitizers (for example
#   "address,undefined"), also adds, to compile AND link:
#     -fsanitize=<PTQ_SANITIZE> -fno-sanitize-recover=all -fno-omit-frame-pointer
#   NO_SANITIZE skips the sanitizer part (used by the libFuzzer targets, which bring their own).
#
# ptq_arch_sources(<target>)
#   Runtime ISA dispatch support (xsimd): one translation unit per instruction set. Looks at the
#   target's SOURCES and gives
#     files ending in `_avx2.cpp`    -> -mavx2 -mfma -ffp-contract=off
#     files ending in `_avx512.cpp`  -> -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx2 -mfma
#                                       -ffp-contract=off
#   -ffp-contract=off: with -mfma, GCC (and Clang) would otherwise fuse a*b+c into one FMA on
#   their own, so the same source line would round differently per ISA; explicit xsimd::fma
#   calls are unaffected. Kernels then match their scalar references bit for bit.
#   Only those files get the flags; all other files keep the baseline ISA. Call it after all
#   sources have been added to the target. Code in such a file must only run after a runtime
#   check (xsimd::available_architectures()), and every function in it that uses xsimd types
#   must be a template on the arch (or have internal linkage) so no ODR clash arises.
#
# Both functions are no-ops for compilers other than GCC and Clang (except the warning message).

include_guard(GLOBAL)

set(PTQ_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wshadow -Wconversion)
set(PTQ_AVX2_FLAGS -mavx2 -mfma -ffp-contract=off)
set(PTQ_AVX512_FLAGS -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx2 -mfma -ffp-contract=off)

function(ptq_target_warnings target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "NO_SANITIZE" "" "")
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(WARNING "ptq_target_warnings(${target}): unsupported compiler "
                    "${CMAKE_CXX_COMPILER_ID}; no warning flags added")
    return()
  endif()
  target_compile_options(${target} PRIVATE ${PTQ_WARNING_FLAGS})
  if(PTQ_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(PTQ_SANITIZE AND NOT arg_NO_SANITIZE)
    set(san_flags "-fsanitize=${PTQ_SANITIZE}" -fno-sanitize-recover=all
                  -fno-omit-frame-pointer)
    target_compile_options(${target} PRIVATE ${san_flags})
    target_link_options(${target} PRIVATE ${san_flags})
  endif()
endfunction()

function(ptq_arch_sources target)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    return()
  endif()
  get_target_property(srcs ${target} SOURCES)
  get_target_property(src_dir ${target} SOURCE_DIR)
  if(NOT srcs)
    return()
  endif()
  foreach(src IN LISTS srcs)
    if(src MATCHES "^\\$<") # generator expression: cannot inspect
      continue()
    endif()
    if(src MATCHES "_avx512\\.cpp$")
      set(flags ${PTQ_AVX512_FLAGS})
    elseif(src MATCHES "_avx2\\.cpp$")
      set(flags ${PTQ_AVX2_FLAGS})
    else()
      continue()
    endif()
    if(NOT IS_ABSOLUTE "${src}")
      set(src "${src_dir}/${src}")
    endif()
    set_property(SOURCE "${src}" TARGET_DIRECTORY ${target} APPEND PROPERTY COMPILE_OPTIONS
                                                                            ${flags})
  endforeach()
endfunction()
