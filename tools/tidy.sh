#!/usr/bin/env bash
# clang-tidy (.clang-tidy) on every library header: the umbrella TU (tests/package/test_abi.cpp
# includes ptq/ptq.hpp, every public header but ptq/mpi.hpp) and, when MPI is built, the MPI
# example (ptq/mpi.hpp); and on the compiled parts' sources (src/). Findings in include/ptq/
# and src/ are errors. Needs a configured and built
# tree with compile_commands.json (tools/test.sh makes build/); about a minute on 2 cores.
#   tools/tidy.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=${1:-build}
if [[ ! -f "$build_dir/compile_commands.json" ]]; then
  echo "tidy.sh: no $build_dir/compile_commands.json; run tools/test.sh first" >&2
  exit 2
fi
units=(tests/package/test_abi.cpp src/kernels/dispatch.cpp src/kernels/kernels_avx2.cpp
       src/kernels/kernels_avx512.cpp src/session/calibration_session.cpp)
if grep -q '"file": "[^"]*/examples/mpi/main.cpp"' "$build_dir/compile_commands.json"; then
  units+=(examples/mpi/main.cpp)
else
  echo "tidy.sh: the MPI example is not built; ptq/mpi.hpp is not checked"
fi
# clang-tidy counts the warnings it suppressed ("43312 warnings generated."): not findings, so
# that line is left out.
for unit in "${units[@]}"; do
  echo "tidy.sh: $unit"
  status=0
  out=$(clang-tidy-14 -p "$build_dir" --quiet --warnings-as-errors='*' "$unit" 2>&1) || status=$?
  grep -v '^[0-9]* warnings\? generated\.$' <<<"$out" || true
  [[ $status -eq 0 ]] || exit "$status"
done
echo "tidy.sh: no findings in include/ptq/ or src/"
