#!/usr/bin/env bash
# Peak resident memory and wall time of `ptq observe` in the default one-pass mode and in
# `--memory bounded`, IFMR and HFMG, over the same batch files (default: 32 files of 4M float32
# values each, 512 MB, student-t data). Prints one line per run and the bounded/one-pass ratios.
#
#   bash benchmarks/memory_modes.sh [PTQ_BINARY] [BATCHES] [ELEMENTS_PER_BATCH]
#
# The files are written once to a temporary folder (removed at the end); each run is timed by
# GNU time (/usr/bin/time -v: "Maximum resident set size", "Elapsed (wall clock) time"). Uses
# /usr/bin/python3 with numpy for the data. Not a test: the figures depend on the machine.
set -euo pipefail

ptq=${1:-build/tools/ptq/ptq}
batches=${2:-32}
elements=${3:-4194304}
[[ -x $ptq ]] || { echo "memory_modes.sh: no ptq binary at '$ptq'" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "memory_modes.sh: needs GNU time (/usr/bin/time)" >&2; exit 1; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/ptq-memory-modes.XXXXXX")
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 - "$dir" "$batches" "$elements" <<'PY'
import sys
import numpy as np
d, b, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(12)
for i in range(b):
    np.save(f"{d}/batch{i:03d}.npy", rng.standard_t(4.0, n).astype(np.float32))
PY
files=("$dir"/batch*.npy)
mb=$(( batches * elements * 4 / 1048576 ))
echo "data: ${#files[@]} files of $elements float32 values ($mb MB); ptq: $ptq"

declare -A rss secs out
for algo in ifmr hfmg; do
  for mode in one-pass bounded; do
    log="$dir/time.$algo.$mode"
    out[$algo.$mode]=$(/usr/bin/time -v -o "$log" "$ptq" observe --algo "$algo" --memory "$mode" \
      "${files[@]}")
    rss[$algo.$mode]=$(awk -F': ' '/Maximum resident set size/ {print int($2 / 1024)}' "$log")
    secs[$algo.$mode]=$(awk -F': ' '/Elapsed \(wall clock\)/ {
      n = split($2, p, ":"); s = 0; for (i = 1; i <= n; ++i) s = s * 60 + p[i]; print s }' "$log")
    printf '%-4s %-9s peak RSS %6d MB  wall %7.2f s  %s\n' "$algo" "$mode" \
      "${rss[$algo.$mode]}" "${secs[$algo.$mode]}" "${out[$algo.$mode]}"
  done
  if [[ ${out[$algo.one-pass]} != "${out[$algo.bounded]}" ]]; then
    echo "memory_modes.sh: $algo: the two modes printed different results" >&2
    exit 1
  fi
  awk -v a="$algo" -v r1="${rss[$algo.one-pass]}" -v r2="${rss[$algo.bounded]}" \
      -v t1="${secs[$algo.one-pass]}" -v t2="${secs[$algo.bounded]}" \
      'BEGIN { printf "%-4s bounded/one-pass: memory %.3f, time %.2f; same result\n", a, r2 / r1, t2 / t1 }'
done
