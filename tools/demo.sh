#!/usr/bin/env bash
# Builds only the ptq command-line tool into build/ and runs its main job:
#   tools/demo.sh [arguments...]   ->  build/tools/ptq/ptq calibrate [arguments...]
# (or `ptq demo [arguments...]` while the tool has no `calibrate` subcommand).
# Installs only what the tool needs (tools/install-deps.sh without --test) and configures the
# build as tools/test.sh does (-O2, warnings as errors), so the test command later reuses it.
# Works from any directory; relative paths in the arguments are taken from the caller's cwd.
set -euo pipefail
caller_dir=$PWD
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

tools/install-deps.sh

build_dir=${PTQ_BUILD_DIR:-build}
# The tests, examples and benchmarks are tools/test.sh's (with their own dependencies).
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="${PTQ_BUILD_TYPE:-Release}" \
  "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" -DPTQ_WERROR=ON \
  -DPTQ_BUILD_TESTS=OFF -DPTQ_BUILD_EXAMPLES=OFF -DPTQ_BUILD_BENCHMARKS=OFF >/dev/null
if [[ ! -x "$build_dir/tools/ptq/ptq" ]]; then
  echo "demo.sh: building the ptq tool into $build_dir (about 3 minutes on 2 cores, once)"
fi
if ! cmake --build "$build_dir" --target ptq_cli -j"$(nproc 2>/dev/null || echo 2)"; then
  echo "demo.sh: could not build the ptq_cli target (is there a tools/ptq/main.cpp?)" >&2
  exit 1
fi

if [[ "$build_dir" = /* ]]; then
  ptq="$build_dir/tools/ptq/ptq"
else
  ptq="$root/$build_dir/tools/ptq/ptq"
fi
cd "$caller_dir"
help=$("$ptq" --help 2>&1 || true)
if grep -Eq '^[[:space:]]+calibrate([[:space:]]|$)' <<<"$help"; then
  exec "$ptq" calibrate "$@"
fi
exec "$ptq" demo "$@"
