#!/usr/bin/python3
"""`mpirun -np N ptq calibrate ... --mpi`: the record, the detailed JSON config and the
fake-quantized weights are byte-identical to the one-process run's for N = 1, 2, 3, both memory
modes, IFMR (with DMQ) and HFMG, and batch counts below and above the rank count. A rank that
fails (a bad batch file of rank 1) ends every rank non-zero, with the error printed once and no
output written; a run that would hang fails the test at its timeout.

usage: test_mpi_calibrate.py PTQ MPIEXEC EXAMPLES_DIR WORK_DIR
"""
import os
import re
import shutil
import subprocess
import sys

ptq, mpiexec, examples, work = sys.argv[1:5]
digits = os.path.join(examples, "digits")
batches = [os.path.join(digits, f"batch{i}.safetensors") for i in (0, 1)]
mpirun = [mpiexec, "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,tcp",
          "--mca", "btl_tcp_if_include", "lo"]
failures = []


def run(cmd, timeout=300):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        failures.append(f"timed out (a hang?): {' '.join(cmd)}")
        return None


def config(name, batch_num):
    """A bundled config with batch_num set to `batch_num`."""
    with open(os.path.join(examples, "configs", name)) as f:
        text = f.read()
    text, n = re.subn(r"(?m)^batch_num\s*:\s*\d+", f"batch_num : {batch_num}", text)
    assert n == 1, name
    path = os.path.join(work, f"{name}.{batch_num}.cfg")
    with open(path, "w") as f:
        f.write(text)
    return path


def calibrate(cfg, n_batches, out, extra=()):
    files = [batches[i % 2] for i in range(n_batches)]
    return [ptq, "calibrate", cfg, "--model", os.path.join(digits, "manifest.json"),
            "--weights", os.path.join(digits, "model.safetensors"), "--batches", *files,
            "--record", out + ".txt", "--quant-config", out + ".json",
            "--fake-quant-weights", out + ".safetensors", "--quiet", *extra]


def outputs(out):
    got = []
    for ext in (".txt", ".json", ".safetensors"):
        with open(out + ext, "rb") as f:
            got.append(f.read())
    return got


def table(stdout):
    return stdout[: stdout.find("record:")]


os.makedirs(work, exist_ok=True)
runs = 0
for name in ("dmq_balancer.cfg", "quant_hfmg.cfg"):
    for batch_num in (1, 2, 5):
        cfg = config(name, batch_num)
        ref = os.path.join(work, "ref")
        one = run(calibrate(cfg, batch_num, ref))
        if one is None or one.returncode != 0:
            failures.append(f"{name} batch_num {batch_num}: one process failed: "
                            f"{one and one.stderr}")
            continue
        want = outputs(ref)
        for ranks in (1, 2, 3):
            for memory in ("one-pass", "bounded"):
                if memory == "bounded" and ranks != 2:
                    continue  # the two modes run the same states under --mpi: one check
                what = f"{name} batch_num {batch_num}, -np {ranks}, --memory {memory}"
                out = os.path.join(work, f"mpi{ranks}")
                r = run(mpirun + ["-np", str(ranks)] +
                        calibrate(cfg, batch_num, out, ["--mpi", "--memory", memory]))
                runs += 1
                if r is None:
                    continue
                if r.returncode != 0:
                    failures.append(f"{what}: exit {r.returncode}\n{r.stderr}")
                    continue
                if outputs(out) != want:
                    failures.append(f"{what}: outputs differ from the one-process run")
                if table(r.stdout) != table(one.stdout):
                    failures.append(f"{what}: the table differs:\n{r.stdout}\n---\n{one.stdout}")
                if r.stdout.count("record:") != 1:
                    failures.append(f"{what}: rank 0 alone prints the summary:\n{r.stdout}")

# A rank that fails: rank 1's batch (index 1 of 3) lacks the layers' tensors.
bad = os.path.join(work, "bad_batch.safetensors")
shutil.copy(os.path.join(digits, "model.safetensors"), bad)
cfg = config("dmq_balancer.cfg", 3)
out = os.path.join(work, "fail")
for ext in (".txt", ".json", ".safetensors"):
    if os.path.exists(out + ext):
        os.remove(out + ext)
cmd = calibrate(cfg, 3, out, ["--mpi"])
cmd[cmd.index("--batches") + 2] = bad
# Each rank runs under a shell that reports its exit code and exits 0, so every rank's code is
# seen (mpirun itself reports only the first non-zero one).
report = ['/bin/sh', '-c', '"$@"; echo "rank $OMPI_COMM_WORLD_RANK exit $?"', 'sh']
r = run(mpirun + ["-np", "3"] + report + cmd, timeout=120)
if r is not None:
    codes = sorted(line for line in r.stdout.splitlines() if line.startswith("rank "))
    if codes != ["rank 0 exit 1", "rank 1 exit 1", "rank 2 exit 1"]:
        failures.append(f"a bad batch on rank 1: every rank must exit 1, got {codes}")
    errors = [line for line in r.stderr.splitlines() if ": error: " in line]
    if len(errors) != 1 or "bad_batch.safetensors" not in errors[0]:
        failures.append(f"a bad batch on rank 1: want one error naming the file, got:\n{r.stderr}")
    if "note: each batch file holds every quantizable layer's input under the layer's name " \
            "(on rank 1 of 3)\n" not in r.stderr:
        failures.append(f"a bad batch on rank 1: the error does not name rank 1:\n{r.stderr}")
    left = [out + ext for ext in (".txt", ".json", ".safetensors") if os.path.exists(out + ext)]
    left += [f for f in os.listdir(work) if ".tmp." in f]
    if left:
        failures.append(f"a failed run left outputs: {left}")

# --mpi needs a model from files; --report needs one process.
r = run([ptq, "calibrate", "--mpi"])
if r is None or r.returncode != 2 or "--mpi shards a model from files" not in r.stderr:
    failures.append(f"--mpi without --model: {r and (r.returncode, r.stderr)}")

if failures:
    print("\n\n".join(failures))
    sys.exit(1)
print(f"ok: {runs} mpirun runs byte-identical to one process; a failing rank fails every rank")
