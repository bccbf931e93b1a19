#!/usr/bin/env bash
# Wall time and peak resident memory (rank 0's) of `ptq calibrate` on one model in one process
# (one-pass and --memory bounded) and sharded with `mpirun -np 2 ... --mpi`, IFMR and HFMG, on the
# same batch files in one run; every run's record must be byte-identical to the one-process one.
# The model: a Linear layer 256 -> 256 and BATCHES batch files of ROWS x 256 float32 inputs each
# (default 16 files of 32768 x 256 = 8M values, 32 MB each, 512 MB in all; student-t data).
#
#   bash benchmarks/mpi_calibrate.sh [PTQ_BINARY] [BATCHES] [ROWS]
#
# Needs mpirun (openmpi-bin), GNU time and /usr/bin/python3 with numpy. Not a test: the figures
# depend on the machine (and on its cores: -np 2 on a 2-core machine shares them with nothing).
set -euo pipefail

ptq=${1:-build/tools/ptq/ptq}
batches=${2:-16}
rows=${3:-32768}
[[ -x $ptq ]] || { echo "mpi_calibrate.sh: no ptq binary at '$ptq'" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "mpi_calibrate.sh: needs mpirun (openmpi-bin)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "mpi_calibrate.sh: needs GNU time (/usr/bin/time)" >&2; exit 1; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/ptq-mpi-calibrate.XXXXXX")
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 - "$dir" "$batches" "$rows" <<'PY'
import json, struct, sys
import numpy as np
d, b, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def save(path, tensors):
    header, blobs, at = {}, [], 0
    for name, a in tensors.items():
        raw = a.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
rng = np.random.default_rng(7)
save(f"{d}/weights.safetensors", {"fc.weight": rng.standard_normal((256, 256)) * 0.05})
with open(f"{d}/model.json", "w") as f:
    json.dump({"layers": [{"name": "fc", "type": "Linear", "weight": "fc.weight"}]}, f)
for i in range(b):
    save(f"{d}/batch{i:02d}.safetensors", {"fc": rng.standard_t(4.0, (rows, 256))})
for algo, body in (("ifmr", "ifmr_quantize : { search_range_start : 0.7 search_range_end : 1.3 "
                            "search_step : 0.01 max_percentile : 0.999999 "
                            "min_percentile : 0.999999 asymmetric : true }"),
                   ("hfmg", "hfmg_quantize : { num_of_bins : 4096 asymmetric : true }")):
    with open(f"{d}/{algo}.cfg", "w") as f:
        f.write(f"batch_num : {b}\ncommon_config : {{ arq_quantize : {{ channel_wise : false }} "
                f"{body} }}\n")
PY
files=("$dir"/batch*.safetensors)
echo "data: ${#files[@]} batch files of $rows x 256 float32 ($(( batches * rows * 256 * 4 / 1048576 )) MB); ptq: $ptq"
mpirun=(mpirun --allow-run-as-root --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo)

run() { # run NAME ALGO [launcher ...] -- [extra ptq args ...]
  local name=$1 algo=$2; shift 2
  local launcher=()
  while [[ $1 != -- ]]; do launcher+=("$1"); shift; done
  shift
  local log="$dir/time.$algo.$name"
  /usr/bin/time -v -o "$log" "${launcher[@]}" "$ptq" calibrate "$dir/$algo.cfg" \
    --model "$dir/model.json" --weights "$dir/weights.safetensors" --batches "${files[@]}" \
    --record "$dir/record.$algo.$name.txt" --quiet "$@" >/dev/null
  local rss secs
  rss=$(awk -F': ' '/Maximum resident set size/ {print int($2 / 1024)}' "$log")
  secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {
    n = split($2, p, ":"); s = 0; for (i = 1; i <= n; ++i) s = s * 60 + p[i]; print s }' "$log")
  if ! cmp -s "$dir/record.$algo.$name.txt" "$dir/record.$algo.one-pass.txt"; then
    echo "mpi_calibrate.sh: $algo $name: the record differs from the one-process run" >&2
    exit 1
  fi
  printf '%-4s %-18s wall %6.2f s  peak RSS %5d MB (largest process)\n' "$algo" "$name" "$secs" "$rss"
}

# One process uses every core by default (--threads); "1 thread" rows compare the sharding
# alone: one process of one thread against two ranks of one thread each.
for algo in ifmr hfmg; do
  run one-pass "$algo" --
  run bounded "$algo" -- --memory bounded
  run "-np 2" "$algo" "${mpirun[@]}" -np 2 -- --mpi
  run "one-pass, 1 thread" "$algo" -- --threads 1
  run "-np 2, 1 thread" "$algo" "${mpirun[@]}" -np 2 -- --mpi --threads 1
done
echo "every record is byte-identical to the one-process run's"
