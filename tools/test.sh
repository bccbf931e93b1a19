#!/usr/bin/env bash
# Builds ptq and runs every test (the README's test command). Works from any directory.
#   tools/test.sh [extra cmake configure arguments...]
# Build directory: build/ (Release at -O2, warnings are errors, examples and benchmarks on).
# Environment: PTQ_BUILD_DIR overrides build/, PTQ_BUILD_TYPE overrides Release.
# (-O2 rather than CMake's default -O3: the tool and tests compile ~25% faster; pass
#  -DCMAKE_CXX_FLAGS_RELEASE="-O3 -DNDEBUG" to get CMake's default back.)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=${PTQ_BUILD_DIR:-build}
jobs=$(nproc 2>/dev/null || echo 2)

# The tests' real components too: ONNX Runtime (npm) goes into the build tree.
tools/install-deps.sh --test --ort "$build_dir/ort"

cmake -S . -B "$build_dir" \
  -DCMAKE_BUILD_TYPE="${PTQ_BUILD_TYPE:-Release}" \
  "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" \
  -DPTQ_WERROR=ON \
  -DPTQ_BUILD_TESTS=ON \
  -DPTQ_BUILD_EXAMPLES=ON \
  -DPTQ_BUILD_BENCHMARKS=ON \
  -DPTQ_ORT_REQUIRED=ON \
  -DPTQ_BUILD_PYTHON=ON \
  "$@"
cmake --build "$build_dir" -j"$jobs"
ctest --test-dir "$build_dir" --output-on-failure -j2
