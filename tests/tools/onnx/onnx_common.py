"""Shared by the onnx_* tests: running ptq, reading its files, checking an exported model."""
import atexit
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnx.checker
import onnx.numpy_helper
import onnx.shape_inference

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import onnx_eval  # noqa: E402


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def run(cmd, expect_rc=0):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if expect_rc is not None and p.returncode != expect_rc:
        fail(f"{' '.join(cmd)}: exit {p.returncode}, expected {expect_rc}\n"
             f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        check(info["dtype"] == "F32", f"{path}: {name} is {info['dtype']}")
        out[name] = np.frombuffer(data[8 + n + lo:8 + n + hi], "<f4").reshape(info["shape"])
    return out


def read_npy(path):
    return np.load(path)


def write_npy(path, a):
    np.save(path, np.ascontiguousarray(a, np.float32))


def check_model(path):
    """python3-onnx's full check and strict shape inference, as the issue asks."""
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
    for init in m.graph.initializer:
        onnx.numpy_helper.to_array(init)
    return m


def tmpdir():
    d = tempfile.mkdtemp(prefix="ptq-onnx-test-")
    atexit.register(shutil.rmtree, d, True)
    return d
