#!/usr/bin/python3
"""Whole-process `ptq calibrate` on a ResNet-18-shaped model, beside its read baseline.

The model is generated here (fixed seed, no download): ResNet-18's 17 convolutions (conv1 and
the 16 of the basic blocks; the three 1x1 downsample convs are left out) as Conv2d+BN+ReLU, and
the 512->1000 Linear, 11.5M weights, with BatchNorm statistics; and --batches batch files
(default 8) of 8 images at 224x224, each holding every layer's input under the layer's name
(14.6M float32 values, 58.6 MB per batch: the shapes a forward pass dumps; the values are drawn,
normal for the image and rectified normal after each ReLU, as the tool runs no network).

For each config (IFMR, HFMG, IFMR + DMQ; ARQ per channel on the weights; and IFMR again with
`--memory bounded`, whose record is checked to be the one-pass record) it times, best of
--repeat runs after one warm-up, wall clock:
  - `cat WEIGHTS BATCHES > /dev/null` the page-cache read of every input file,
  - `ptq calibrate ... --timings`     the whole process; its per-phase wall times (stderr),
                                      user and system time, minor page faults and peak RSS
                                      from getrusage of that process,
and prints process / (read + compute), where compute is the process's own fusion, DMQ,
weight, activation and finish (record and input SQNR) phases, the rest being the reads (load,
open), the outputs and the process's start and exit; the issue's goals are system time <= 15 %
of the run and the ratio <= 1.3. A last baseline is the system time of touching as much fresh
memory as the batches hold (`dd bs=SIZE count=1` from /dev/zero: one buffer, filled once), the
floor for a process that keeps every input value, as IFMR does.

  /usr/bin/python3 benchmarks/resnet18_calibrate.py [--build build] [--repeat 3] [--threads 2]
                                                    [--batches 8] [--keep DIR]
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

IMAGES = 8


def layers():
    """(name, cin, cout, kernel, stride, input [C, H, W]) of the 17 convs, then the Linear."""
    out = [("conv1", 3, 64, 7, 2, (3, 224, 224))]
    cin, hw = 64, 56
    for stage, cout in enumerate((64, 128, 256, 512), start=1):
        for block in range(2):
            stride = 2 if stage > 1 and block == 0 else 1
            out.append((f"layer{stage}.{block}.conv1", cin, cout, 3, stride, (cin, hw, hw)))
            hw //= stride
            out.append((f"layer{stage}.{block}.conv2", cout, cout, 3, 1, (cout, hw, hw)))
            cin = cout
    return out


def save_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a)
    text = json.dumps(header)
    text += " " * ((8 - (len(text) + 8) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text.encode())
        for b in blobs:
            b.tofile(f)


def generate(d, batches):
    rng = np.random.default_rng(18)
    weights, manifest = {}, []
    for name, cin, cout, k, stride, _ in layers():
        fan_in = cin * k * k
        weights[name + ".weight"] = rng.normal(0, np.sqrt(2.0 / fan_in), (cout, cin, k, k))
        bn = name.replace("conv", "bn")
        weights[bn + ".weight"] = rng.uniform(0.5, 1.5, cout)
        weights[bn + ".bias"] = rng.normal(0, 0.1, cout)
        weights[bn + ".running_mean"] = rng.normal(0, 0.1, cout)
        weights[bn + ".running_var"] = rng.uniform(0.5, 2.0, cout)
        manifest.append({"name": name, "type": "Conv2d", "weight": name + ".weight",
                         "stride": [stride, stride], "padding": [k // 2, k // 2],
                         "batch_norm": {"weight": bn + ".weight", "bias": bn + ".bias",
                                        "running_mean": bn + ".running_mean",
                                        "running_var": bn + ".running_var", "eps": 1e-5},
                         "activation": "ReLU"})
    weights["fc.weight"] = rng.normal(0, np.sqrt(1.0 / 512), (1000, 512))
    weights["fc.bias"] = rng.normal(0, 0.01, 1000)
    manifest.append({"name": "fc", "type": "Linear", "weight": "fc.weight", "bias": "fc.bias",
                     "flatten": True})
    save_safetensors(os.path.join(d, "weights.safetensors"), weights)
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump({"layers": manifest}, f, indent=1)
    files = []
    for b in range(batches):
        inputs = {}
        for name, _, _, _, _, chw in layers():
            x = rng.standard_normal((IMAGES,) + chw, dtype=np.float32)
            inputs[name] = x if name == "conv1" else np.maximum(x, 0.0, out=x)
        inputs["fc"] = np.maximum(rng.standard_normal((IMAGES, 512), dtype=np.float32), 0.0)
        path = os.path.join(d, f"batch{b}.safetensors")
        save_safetensors(path, inputs)
        files.append(path)
    return files


def configs(batches):
    """The three configs; the Linear is quantized per tensor (ARQ per channel is for convs)."""
    ifmr = ("ifmr_quantize : { search_range_start : 0.7 search_range_end : 1.3 "
            "search_step : 0.01 max_percentile : 0.999999 min_percentile : 0.999999 "
            "asymmetric : true }")
    hfmg = "hfmg_quantize : { num_of_bins : 4096 asymmetric : true }"
    dmq = "dmq_balancer : { migration_strength : 0.5 }"

    def config(act):
        return (f"batch_num : {batches}\nactivation_offset : true\n"
                f"common_config : {{ arq_quantize : {{ channel_wise : true }} {act} }}\n"
                'override_layer_types : { layer_type : "Linear" calibration_config : { '
                f"arq_quantize : {{ channel_wise : false }} {act} }} }}\n")

    return {"ifmr": config(ifmr), "hfmg": config(hfmg), "dmq": config(ifmr + " " + dmq)}


def run_once(argv, stderr=subprocess.DEVNULL):
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"resnet18_calibrate.py: {' '.join(argv)} exited with {code}")
    return {"wall": wall, "user": ru.ru_utime, "sys": ru.ru_stime, "minflt": ru.ru_minflt,
            "maxrss_mb": ru.ru_maxrss / 1024.0}


def timed_calibrate(argv, log):
    """One `ptq calibrate --timings` run: its rusage and the phase times it printed."""
    with open(log, "w") as f:
        r = run_once(argv, stderr=f)
    with open(log) as f:
        text = f.read()
    m = re.search(r"^timings: (.*)$", text, re.M)
    if not m:
        sys.exit(f"resnet18_calibrate.py: no timings line in the output of {' '.join(argv)}")
    r["phases"] = {k: float(v) for k, v in re.findall(r"(\w+) ([0-9.]+) s", m.group(1))}
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="build directory (default: build)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--keep", help="generate into (or reuse) this folder instead of a temporary")
    a = ap.parse_args()
    ptq = os.path.join(a.build, "tools", "ptq", "ptq")
    if not os.access(ptq, os.X_OK):
        sys.exit(f"resnet18_calibrate.py: no ptq binary at '{ptq}' (build it, or pass --build)")
    tmp = None
    if a.keep:
        d = a.keep
        os.makedirs(d, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="ptq-resnet18-")
        d = tmp.name
    files = [os.path.join(d, f"batch{b}.safetensors") for b in range(a.batches)]
    if not all(os.path.exists(p) for p in files + [os.path.join(d, "manifest.json")]):
        files = generate(d, a.batches)
    data_mb = sum(os.path.getsize(p) for p in files) / 1e6
    print(f"model: 17 Conv2d+BN+ReLU + Linear, {a.batches} batches of {IMAGES} images, "
          f"{data_mb:.0f} MB of layer inputs; threads {a.threads}; {ptq}")
    inputs = [os.path.join(d, "weights.safetensors")] + files
    cat = min((run_once(["cat"] + inputs) for _ in range(a.repeat + 1)), key=lambda r: r["wall"])
    print(f"{'cat weights batches > /dev/null':34} {cat['wall']:7.3f} s")
    mb = int(data_mb / 1.048576) + 1
    dd = min((run_once(["dd", "if=/dev/zero", "of=/dev/null", f"bs={mb}M", "count=1"],
                       stderr=subprocess.DEVNULL) for _ in range(a.repeat + 1)),
             key=lambda r: r["sys"])
    print(f"{f'dd bs={mb}M count=1 (fresh memory)':34} {dd['wall']:7.3f} s, sys {dd['sys']:.3f} s, "
          f"{dd['minflt']} minor faults")
    texts = configs(a.batches)
    for name in texts:
        with open(os.path.join(d, f"{name}.cfg"), "w") as f:
            f.write(texts[name])
    # IFMR once more in the bounded memory mode: two passes over the files instead of keeping
    # every value, so no fresh memory for them; its record must be the one-pass record, byte for
    # byte.
    runs = [(name, name, []) for name in texts]
    runs.append(("ifmr-bounded", "ifmr", ["--memory", "bounded"]))
    for name, cfg_name, extra in runs:
        cfg = os.path.join(d, f"{cfg_name}.cfg")
        argv = [ptq, "calibrate", cfg, "--model", os.path.join(d, "manifest.json"),
                "--weights", os.path.join(d, "weights.safetensors"), "--batches", *files,
                "--record", os.path.join(d, f"{name}.record.txt"), "--threads", str(a.threads),
                "--quiet", "--timings", *extra]
        log = os.path.join(d, f"{name}.stderr")
        timed_calibrate(argv, log)  # warm-up
        best = min((timed_calibrate(argv, log) for _ in range(a.repeat)), key=lambda r: r["wall"])
        p = best["phases"]
        compute = sum(p.get(k, 0.0)
                      for k in ("fusion", "dmq", "weights", "activations", "finish"))
        phases = ", ".join(f"{k} {v:.3f}" for k, v in p.items())
        print(f"ptq calibrate ({name}): wall {best['wall']:.3f} s, user {best['user']:.3f} s, "
              f"sys {best['sys']:.3f} s ({100 * best['sys'] / best['wall']:.1f} % of wall), "
              f"{best['minflt']} minor faults, peak RSS {best['maxrss_mb']:.0f} MB")
        print(f"  phases (s): {phases}")
        print(f"  process / (read {cat['wall']:.3f} + compute {compute:.3f}) = "
              f"{best['wall'] / (cat['wall'] + compute):.2f}")
        if cfg_name != name:
            with open(os.path.join(d, f"{name}.record.txt"), "rb") as x, \
                    open(os.path.join(d, f"{cfg_name}.record.txt"), "rb") as y:
                if x.read() != y.read():
                    sys.exit(f"resnet18_calibrate.py: the {name} record differs from {cfg_name}'s")
            print(f"  record: byte-identical to the {cfg_name} record")

    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
