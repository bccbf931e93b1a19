#!/usr/bin/env python3
"""Exports the bundled digits CNN (model.safetensors) as the float ONNX model model.onnx.

Run by a developer after train.py (never by the tests), with Debian's packages:
    apt-get install python3-torch python3-onnx python3-numpy
    /usr/bin/python3 examples/digits/export_onnx.py

The output is reproducible: the same model.safetensors gives the same model.onnx byte for byte
(torch 1.13.1 and onnx 1.12 as Debian 12 ships them).

What it writes, and why:
- opset 13 (the first with per-axis QuantizeLinear/DequantizeLinear), IR 7, a dynamic batch
  axis; input "images" [N,1,8,8], output "logits" [N,10].
- BatchNorm stays a BatchNormalization node after each Conv (torch's TrainingMode.PRESERVE on an
  eval model). Whether a BatchNorm is folded is the calibration config's choice (`do_fusion`,
  `skip_fusion_layers`), so `ptq export --format onnx-qdq` folds it, not this script.
- Every initializer keeps its PyTorch state_dict name, so the weight of each layer is found
  through the manifest's `weight` field (conv1.weight, conv2.weight, fc.weight).
- The weights are the exact float32 values of model.safetensors.
- The zero Pad that torch puts before AveragePool is removed (it pads nothing).
"""
import io
import json
import os
import struct
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train import DigitsNet  # noqa: E402  (the one definition of the network)


def read_safetensors(path):
    """{name: float32 numpy array} of a plain safetensors file (F32 tensors only)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise SystemExit(f"{path}: tensor {name} is {info['dtype']}, expected F32")
        lo, hi = info["data_offsets"]
        out[name] = np.frombuffer(data[base + lo:base + hi], dtype="<f4").reshape(info["shape"])
    return out


def drop_zero_pads(model):
    """Removes Pad nodes whose pads are all zero (and their Constant), rewiring their consumers."""
    g = model.graph
    consts = {n.output[0]: n for n in g.node if n.op_type == "Constant"}
    for pad in [n for n in g.node if n.op_type == "Pad"]:
        src = consts.get(pad.input[1]) if len(pad.input) > 1 else None
        if src is None:
            continue
        pads = onnx.numpy_helper.to_array(src.attribute[0].t)
        if pads.any():
            continue
        for n in g.node:
            for i, name in enumerate(n.input):
                if name == pad.output[0]:
                    n.input[i] = pad.input[0]
        g.node.remove(pad)
        if not any(src.output[0] in n.input for n in g.node):
            g.node.remove(src)


def main():
    state = read_safetensors(os.path.join(HERE, "model.safetensors"))
    model = DigitsNet()
    missing, unexpected = model.load_state_dict(
        {k: torch.from_numpy(v.copy()) for k, v in state.items()}, strict=False)
    # num_batches_tracked is not in the weights file (only float tensors are); nothing else may be.
    if [k for k in missing if not k.endswith("num_batches_tracked")] or unexpected:
        raise SystemExit(f"model.safetensors does not fit DigitsNet: {missing} {unexpected}")
    model.eval()

    buf = io.BytesIO()
    torch.onnx.export(model, torch.zeros(1, 1, 8, 8), buf, opset_version=13,
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False,
                      input_names=["images"], output_names=["logits"],
                      dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}})
    onnx_model = onnx.load_from_string(buf.getvalue())
    drop_zero_pads(onnx_model)
    onnx_model.producer_name = "ptq examples/digits/export_onnx.py"
    onnx_model.producer_version = ""

    # The initializers must be the safetensors tensors, bit for bit, under the same names.
    for init in onnx_model.graph.initializer:
        if init.name not in state:
            raise SystemExit(f"initializer {init.name} is not a tensor of model.safetensors")
        if onnx.numpy_helper.to_array(init).tobytes() != state[init.name].tobytes():
            raise SystemExit(f"initializer {init.name} differs from model.safetensors")
    onnx.checker.check_model(onnx_model, full_check=True)

    path = os.path.join(HERE, "model.onnx")
    with open(path + ".tmp", "wb") as f:
        f.write(onnx_model.SerializeToString())
    os.replace(path + ".tmp", path)
    print(f"wrote {path}: " + ", ".join(n.op_type for n in onnx_model.graph.node))


if __name__ == "__main__":
    main()
