"""Shared by the ort_* tests: ONNX Runtime (onnxruntime-node, through ort_run.js) on a model,
the int8 kernels of its optimized graph, and a skip that says why when node or the package is
missing (exit 77, ctest's SKIP_RETURN_CODE) unless PTQ_ORT_REQUIRED makes that a failure."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "onnx"))
from onnx_common import check, fail, read_safetensors, run, tmpdir  # noqa: E402,F401

# The ops of ONNX Runtime's int8 kernels, and the float ops a quantized layer must not leave.
INT8_OPS = {"QLinearConv", "QGemm", "QLinearMatMul", "MatMulIntegerToFloat", "QLinearAveragePool",
            "QLinearGlobalAveragePool", "QLinearAdd", "QLinearMul", "QLinearConcat",
            "QLinearConvTranspose"}
FLOAT_LAYER_OPS = {"Conv", "FusedConv", "Gemm", "MatMul", "ConvTranspose", "FusedGemm",
                   "FusedMatMul", "NchwcConv"}


def node_and_modules():
    node = os.environ.get("PTQ_NODE", "node")
    modules = os.environ.get("PTQ_ORT_NODE_MODULES", "")
    required = os.environ.get("PTQ_ORT_REQUIRED", "0") in ("1", "ON", "TRUE", "true")
    missing = None
    if shutil.which(node) is None:
        missing = f"node ('{node}') is not installed"
    elif not os.path.isfile(os.path.join(modules, "onnxruntime-node", "package.json")):
        missing = f"onnxruntime-node is not in '{modules}'"
    if missing:
        msg = (f"{missing}; install it with tools/install-deps.sh --ort <build>/ort "
               "(tools/test.sh does)")
        if required:
            fail(msg)
        print("SKIP: " + msg)
        sys.exit(77)
    return node, modules


class Ort:
    """ONNX Runtime's CPU provider on float32 input batches, through ort_run.js."""

    def __init__(self):
        self.node, self.modules = node_and_modules()
        self.work = tmpdir()

    def run(self, model, x, input_name="images", optimized=None, level="all", threads=1,
            repeat=0, profile=None):
        src = os.path.join(self.work, "input.f32")
        np.ascontiguousarray(x, np.float32).tofile(src)
        prefix = os.path.join(self.work, "out")
        cmd = [self.node, os.path.join(HERE, "ort_run.js"), model, input_name, src,
               ",".join(str(d) for d in x.shape), prefix, "--level", level, "--threads",
               str(threads), "--repeat", str(repeat)]
        if optimized:
            cmd += ["--optimized", optimized]
        if profile:
            cmd += ["--profile", profile]
        env = dict(os.environ, NODE_PATH=self.modules)
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode != 0:
            fail(f"ONNX Runtime on {model}: {p.stderr.strip()}")
        summary = json.loads(p.stdout)
        outs = {}
        for name, info in summary["outputs"].items():
            safe = "".join(c if c.isalnum() or c in "_.-" else "_" for c in name)
            outs[name] = np.fromfile(f"{prefix}.{safe}.f32", np.float32).reshape(info["dims"])
        return outs, summary


def int8_kernels(model_proto):
    """The op types of an optimized graph, and its nodes by op type."""
    ops = {}
    for n in model_proto.graph.node:
        ops.setdefault(n.op_type, []).append(n)
    return ops
