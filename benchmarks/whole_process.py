#!/usr/bin/python3
"""Whole-process speed of `ptq observe`, beside its own baselines in the same run.

For each workload (IFMR on one 16M-float .npy; HFMG on four 4M-float .npy files) it times
  - `cat FILES > /dev/null`          the page-cache read of the same bytes (the floor for I/O),
  - the in-process compute           the Google Benchmark figure of the same work
                                     (BM_ifmr_full_16M/T, BM_hfmg_observe_4x4M/T + finalize/T),
  - `ptq observe ... FILES`          the whole process: start, map, check, compute, print,
and prints process / (read + compute), the issue's goal being <= 1.25. Every figure is the best
of --repeat runs after one warm-up, wall clock; user/system time and peak RSS come from
getrusage of the best process run. The data is generated (fixed seed) in a temporary folder.

  /usr/bin/python3 benchmarks/whole_process.py [--build build] [--repeat 7] [--threads 2]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def run_once(argv, stdout):
    """Wall time and this child's own rusage (os.wait4: not the max over all children)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=stdout)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"whole_process.py: {' '.join(argv)} exited with {proc.returncode}")
    return {"wall": wall, "user": ru.ru_utime, "sys": ru.ru_stime, "minflt": ru.ru_minflt,
            "maxrss_mb": ru.ru_maxrss / 1024.0}


def best_of(repeat, argv, stdout=subprocess.DEVNULL):
    """The run with the best wall time of `repeat` runs, after one warm-up run."""
    run_once(argv, stdout)
    return min((run_once(argv, stdout) for _ in range(repeat)), key=lambda r: r["wall"])


def bench_seconds(binary, names):
    """Sum of the best real_time (seconds) of the named Google Benchmark runs, and the kernel
    arch they ran on (their label)."""
    filt = "^(" + "|".join(names) + ")(/manual_time)?$"
    out = subprocess.run([binary, "--benchmark_filter=" + filt, "--benchmark_format=json",
                          "--benchmark_repetitions=3"], capture_output=True, text=True, check=True)
    runs = json.loads(out.stdout)["benchmarks"]
    total, arch = 0.0, ""
    for name in names:
        times = [r["real_time"] for r in runs
                 if r["run_name"] in (name, name + "/manual_time")
                 and r.get("run_type") == "iteration"]
        if not times:
            sys.exit(f"whole_process.py: benchmark {name} did not run in {binary}")
        unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[runs[0]["time_unit"]]
        total += min(times) * unit
        arch = next((r.get("label", "") for r in runs
                     if r["run_name"] in (name, name + "/manual_time")), "") or arch
    return total, arch


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="build directory (default: build)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    ptq = os.path.join(a.build, "tools", "ptq", "ptq")
    bench = os.path.join(a.build, "benchmarks")
    for f in (ptq, os.path.join(bench, "ptq_bench_ifmr"), os.path.join(bench, "ptq_bench_hfmg")):
        if not os.path.isfile(f):
            sys.exit(f"whole_process.py: {f} not found: build with -DPTQ_BUILD_BENCHMARKS=ON")
    with tempfile.TemporaryDirectory(prefix="ptq-whole-") as tmp:
        rng = np.random.default_rng(12345)
        big = os.path.join(tmp, "big.npy")
        np.save(big, rng.standard_normal(16 << 20, dtype=np.float32))
        parts = []
        for b in range(4):
            parts.append(os.path.join(tmp, f"b{b}.npy"))
            np.save(parts[-1], rng.standard_normal(4 << 20, dtype=np.float32))
        t = str(a.threads)
        workloads = [
            ("IFMR, 16M floats", [big], ["--algo", "ifmr"],
             os.path.join(bench, "ptq_bench_ifmr"), [f"BM_ifmr_full_16M/{t}"]),
            ("HFMG, 4 x 4M floats", parts, ["--algo", "hfmg"],
             os.path.join(bench, "ptq_bench_hfmg"),
             [f"BM_hfmg_observe_4x4M/{t}", f"BM_hfmg_finalize_4096/{t}"]),
        ]
        print(f"threads {t}; best of {a.repeat} runs, wall clock; cpu: {cpu_model()}")
        print("| workload | cat (page cache) | in-process compute | ptq observe (process) |"
              " ratio process/(read+compute) | user | sys | minor faults | peak RSS |")
        print("|---|---|---|---|---|---|---|---|---|")
        for title, files, args, binary, names in workloads:
            cat = best_of(a.repeat, ["cat", *files])
            compute, arch = bench_seconds(binary, names)
            proc = best_of(a.repeat, [ptq, "observe", *args, "--threads", t, *files])
            ratio = proc["wall"] / (cat["wall"] + compute)
            print(f"| {title} ({arch}) | {cat['wall']*1e3:.1f} ms | {compute*1e3:.1f} ms |"
                  f" {proc['wall']*1e3:.1f} ms | {ratio:.2f} | {proc['user']*1e3:.0f} ms |"
                  f" {proc['sys']*1e3:.0f} ms | {proc['minflt']} | {proc['maxrss_mb']:.0f} MB |")


if __name__ == "__main__":
    main()
