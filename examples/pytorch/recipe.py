#!/usr/bin/env python3
"""From a PyTorch model to ptq and back (docs/deploy.md, "From PyTorch"), with Debian's
python3-torch, python3-numpy and python3-onnx:

  - export_onnx:             the float ONNX model ptq's exporters read (the flags they need);
  - dump_layer_inputs:       each quantizable layer's input, one safetensors file per batch,
                             for `ptq calibrate --batches`;
  - load_fake_quant_weights: `ptq calibrate --fake-quant-weights` loaded back into the model,
                             BatchNorms that calibration fused replaced by Identity and a fused
                             bias given to a conv that had none; every tensor must find its
                             place (no bias can be lost silently);
  - main:                    the toolkit's two-pass flow on a model of your own, run by the
                             tests on the bundled digits network with bias-free convolutions.

  /usr/bin/python3 examples/pytorch/recipe.py PTQ WORK_DIR
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import torch


def save_safetensors(path, tensors):
    """{name: float32 array} as a plain safetensors file."""
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    text = json.dumps(header)
    text += " " * ((8 - (len(text) + 8) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode() + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    out = {}
    for name, info in json.loads(data[8:8 + n]).items():
        if name != "__metadata__":
            lo, hi = info["data_offsets"]
            out[name] = np.frombuffer(data[8 + n + lo:8 + n + hi], "<f4").reshape(info["shape"])
    return out


# [deploy:export]
def export_onnx(model, example_input, path):
    """The float model as ptq's ONNX exporters read it: opset 13 (per-axis QuantizeLinear),
    every BatchNorm kept as a node (PRESERVE on an eval model: ptq folds the ones calibration
    folded) and every initializer under its state_dict name (no constant folding), so the
    manifest's weight names find each layer's node."""
    model.eval()
    torch.onnx.export(model, example_input, path, opset_version=13,
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False,
                      input_names=["images"], output_names=["logits"],
                      dynamic_axes={"images": {0: "n"}, "logits": {0: "n"}})
# [/deploy:export]


# [deploy:dump]
def dump_layer_inputs(model, layer_names, batches, folder):
    """One safetensors file per calibration batch, each layer's input under the layer's name
    (the manifest's names: `ptq calibrate --batches`). Returns the paths."""
    inputs, paths = {}, []
    hooks = [model.get_submodule(n).register_forward_hook(
        lambda m, inp, out, n=n: inputs.__setitem__(n, inp[0].detach().numpy().copy()))
        for n in layer_names]
    model.eval()
    with torch.no_grad():
        for b, batch in enumerate(batches):
            model(batch)
            paths.append(os.path.join(folder, f"batch{b}.safetensors"))
            save_safetensors(paths[-1], inputs)
    for h in hooks:
        h.remove()
    return paths
# [/deploy:dump]


# [deploy:load]
def load_fake_quant_weights(model, path, manifest):
    """Loads `ptq calibrate --fake-quant-weights` into `model`: a layer whose BatchNorm was fused
    gets the fused weight and bias (a conv without a bias gets one) and its BatchNorm becomes an
    Identity. Every tensor of the file must be a tensor of the model, and every float tensor of
    the model must come from the file: a missing or extra key is an error, not a dropped bias."""
    tensors = {k: torch.from_numpy(np.array(v)) for k, v in read_safetensors(path).items()}
    for layer in manifest["layers"]:
        bn = layer.get("batch_norm")
        if bn is None or bn["weight"] in tensors:
            continue  # no BatchNorm, or calibration kept it apart
        module = model.get_submodule(layer["name"])
        if module.bias is None:
            module.bias = torch.nn.Parameter(torch.zeros(module.out_channels))
        parent, _, child = bn["weight"].rpartition(".")[0].rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, child, torch.nn.Identity())
    result = model.load_state_dict(tensors, strict=False)
    missing = [k for k in result.missing_keys if not k.endswith("num_batches_tracked")]
    if missing or result.unexpected_keys:
        raise RuntimeError(f"{path}: the model has no place for {result.unexpected_keys} and "
                           f"the file has no value for {missing}")
# [/deploy:load]


class DigitsNoBias(torch.nn.Module):
    """The bundled digits network with bias-free convolutions (each conv bias moved into its
    BatchNorm's running mean: the same function), as torchvision models are built."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(16)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(32)
        self.pool = torch.nn.AvgPool2d(2)
        self.fc = torch.nn.Linear(32 * 4 * 4, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


def digits_without_bias(examples):
    w = read_safetensors(os.path.join(examples, "digits", "model.safetensors"))
    state = {}
    for conv, bn in (("conv1", "bn1"), ("conv2", "bn2")):
        state[conv + ".weight"] = w[conv + ".weight"]
        for p in ("weight", "bias", "running_var"):
            state[f"{bn}.{p}"] = w[f"{bn}.{p}"]
        state[bn + ".running_mean"] = w[bn + ".running_mean"] - w[conv + ".bias"]
    state["fc.weight"], state["fc.bias"] = w["fc.weight"], w["fc.bias"]
    model = DigitsNoBias()
    model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()},
                          strict=False)
    return model.eval()


def manifest_of(model):
    bn = lambda p: {"weight": f"{p}.weight", "bias": f"{p}.bias",  # noqa: E731
                    "running_mean": f"{p}.running_mean", "running_var": f"{p}.running_var",
                    "eps": 1e-5}
    return {"layers": [
        {"name": "conv1", "type": "Conv2d", "weight": "conv1.weight", "padding": [1, 1],
         "batch_norm": bn("bn1"), "activation": "ReLU"},
        {"name": "conv2", "type": "Conv2d", "weight": "conv2.weight", "padding": [1, 1],
         "batch_norm": bn("bn2"), "activation": "ReLU"},
        {"name": "pool", "type": "AvgPool2d", "kernel_size": [2, 2], "stride": [2, 2]},
        {"name": "fc", "type": "Linear", "weight": "fc.weight", "bias": "fc.bias",
         "flatten": True}]}


def accuracy(model, images, labels):
    with torch.no_grad():
        return float((model(torch.from_numpy(images)).argmax(1).numpy() == labels).mean())


def main():
    ptq, work = sys.argv[1:3]
    examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    config = os.path.join(examples, "configs", "quant.cfg")
    model = digits_without_bias(examples)
    calib = read_safetensors(os.path.join(examples, "digits", "calib.safetensors"))["images"]
    test = read_safetensors(os.path.join(examples, "digits", "test.safetensors"))
    images, labels = np.array(test["images"]), test["labels"].astype(np.int64)
    print(f"FP32: {accuracy(model, images, labels):.4f}")
    manifest = manifest_of(model)
    with open(os.path.join(work, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    save_safetensors(os.path.join(work, "weights.safetensors"),
                     {k: v.numpy() for k, v in model.state_dict().items()
                      if v.is_floating_point()})
    batches = [torch.from_numpy(np.array(calib[i:i + 32])) for i in (0, 32)]
    for step in (1, 2):  # the toolkit's flow: the second pass sees the quantized weights
        paths = dump_layer_inputs(model, ["conv1", "conv2", "pool", "fc"], batches, work)
        fq = os.path.join(work, f"fq{step}.safetensors")
        subprocess.run([ptq, "calibrate", config, "--model", os.path.join(work, "manifest.json"),
                        "--weights", os.path.join(work, "weights.safetensors"), "--batches",
                        *paths, "--record", os.path.join(work, f"record{step}.txt"),
                        "--fake-quant-weights", fq, "--quiet"], check=True)
        model = digits_without_bias(examples)
        load_fake_quant_weights(model, fq, manifest)
        print(f"pass {step}: fake-quantized weights, float activations: "
              f"{accuracy(model, images, labels):.4f}")
    export_onnx(digits_without_bias(examples), torch.zeros(1, 1, 8, 8),
                os.path.join(work, "model.onnx"))


if __name__ == "__main__":
    main()
