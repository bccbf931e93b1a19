#!/usr/bin/env bash
# Compile time and peak memory of the TUs an engine writes (benchmarks/compile_time/): the
# config alone, the session, the umbrella header, each beside a baseline TU of standard headers
# compiled in the same run. Two ways: as a TU of a program that links ptq::ptq (the definitions
# that target gives: the session's calls and the float config parser are compiled in
# ptq::session, the kernels in ptq::kernels) and from the headers alone (a plain -I). Every TU is
# compiled -O2 -c, REPEAT times (3); the table gives the least wall time and the largest peak
# resident memory of the compiler.
#   benchmarks/compile_time.sh [COMPILER...]      (default: g++ and clang++-14 when present)
# Environment: REPEAT (3), CXXFLAGS (extra flags, e.g. -std=c++20).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

compilers=("$@")
if [[ ${#compilers[@]} -eq 0 ]]; then
  compilers=(g++)
  command -v clang++-14 >/dev/null && compilers+=(clang++-14)
fi
repeat=${REPEAT:-3}
out=$(mktemp -d /tmp/ptq-compile-time.XXXXXX)
trap 'rm -rf "$out"' EXIT

printf '%-12s %-13s %-10s %9s %10s %11s\n' compiler build TU "time (s)" "peak (MB)" "x baseline"
for cxx in "${compilers[@]}"; do
  for build in ptq::ptq headers; do
    defs=(-DPTQ_SESSION_COMPILED=1 -DPTQ_KERNELS_DISPATCHED=1)
    [[ $build == headers ]] && defs=()
    base_time=""
    for tu in baseline config session umbrella; do
      best=""
      peak=0
      for ((r = 0; r < repeat; ++r)); do
        /usr/bin/time -f '%e %M' -o "$out/time" "$cxx" -std=c++17 -O2 ${CXXFLAGS:-} "${defs[@]}" \
          -Iinclude -c "benchmarks/compile_time/${tu}_tu.cpp" -o "$out/${tu}.o"
        read -r secs kb <"$out/time"
        if [[ -z "$best" ]] || awk "BEGIN{exit !($secs < $best)}"; then best=$secs; fi
        ((kb > peak)) && peak=$kb
      done
      [[ -z "$base_time" ]] && base_time=$best
      printf '%-12s %-13s %-10s %9.2f %10.0f %11.1f\n' "$cxx" "$build" "$tu" "$best" \
        "$((peak / 1024))" "$(awk "BEGIN{print $best / $base_time}")"
    done
  done
done
echo "($(uname -m), $(nproc) cores; $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1))"
