#!/usr/bin/python3
"""Every golden activation case (tests/data/numeric-cases, `ptq observe`) under
`mpirun -np N ptq observe ... --mpi` for N = 2, 3 (-np 1 in test_mpi_calibrate.py): the same exit code and the same printed
result, byte for byte, as one process (`--memory one-pass`, the default); an error case fails on
every rank with one error printed.

usage: test_mpi_golden.py PTQ MPIEXEC CASES_DIR
"""
import json
import os
import subprocess
import sys

ptq, mpiexec, cases_dir = sys.argv[1:4]
mpirun = [mpiexec, "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,tcp",
          "--mca", "btl_tcp_if_include", "lo"]
failures = []
runs = 0
cases = 0
for name in sorted(os.listdir(cases_dir)):
    path = os.path.join(cases_dir, name, "case.json")
    if not os.path.isfile(path):
        continue
    with open(path) as f:
        case = json.load(f)
    if case["args"][0] != "observe":
        continue
    cases += 1
    inputs = [os.path.join(cases_dir, name, i) for i in case["inputs"]]
    cmd = [ptq] + case["args"] + inputs
    one = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    for ranks in (2, 3):
        try:
            r = subprocess.run(mpirun + ["-np", str(ranks)] + cmd + ["--mpi"],
                               capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            failures.append(f"{name} -np {ranks}: timed out (a hang?)")
            continue
        runs += 1
        if (r.returncode == 0) != (one.returncode == 0) or r.stdout != one.stdout:
            failures.append(f"{name} -np {ranks}: exit {r.returncode}, stdout {r.stdout!r}; "
                            f"one process: exit {one.returncode}, stdout {one.stdout!r}\n"
                            f"{r.stderr}")
        if one.returncode != 0:
            errors = [line for line in r.stderr.splitlines() if ": error: " in line]
            if len(errors) != 1:
                failures.append(f"{name} -np {ranks}: want one error line, got:\n{r.stderr}")
if cases != 27:  # the observe cases of tests/data/numeric-cases
    failures.append(f"{cases} observe cases in {cases_dir}, expected 27")
if failures:
    print("\n\n".join(failures))
    sys.exit(1)
print(f"ok: {cases} golden observe cases, {runs} mpirun runs, each as one process")
