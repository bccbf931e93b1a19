#!/usr/bin/env python3
"""Trains the bundled digits CNN and writes everything the example and `ptq calibrate` use.

Run once by a developer (never by the tests), with Debian's packages:
    apt-get install python3-torch python3-sklearn python3-numpy
    /usr/bin/python3 examples/digits/train.py

Data: the 8x8 handwritten digits that scikit-learn ships (1797 images, pixel values 0..16,
scaled to [0, 1]). Split with a fixed seed: 540 test images, the rest for training; the first 64
training images (2 batches of 32) are the calibration split.

Writes into examples/digits/:
  model.safetensors        the trained weights (PyTorch state_dict names, float32)
  manifest.json            the layer list for `ptq calibrate --model`
  calib.safetensors        "images" [64,1,8,8], "labels" [64]
  test.safetensors         "images" [540,1,8,8], "labels" [540]
  batch0.safetensors,      each quantizable layer's input for one calibration batch of 32,
  batch1.safetensors       under the layer's name (dumped with forward hooks, float model)
"""
import json
import os
import struct

import numpy as np
import torch

SEED = 20261130
HERE = os.path.dirname(os.path.abspath(__file__))


class DigitsNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(16)
        self.relu1 = torch.nn.ReLU()
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = torch.nn.BatchNorm2d(32)
        self.relu2 = torch.nn.ReLU()
        self.pool = torch.nn.AvgPool2d(2)
        self.fc = torch.nn.Linear(32 * 4 * 4, 10)

    def forward(self, x):
        x = self.relu1(self.bn1(self.conv1(x)))
        x = self.relu2(self.bn2(self.conv2(x)))
        x = self.pool(x)
        return self.fc(torch.flatten(x, 1))


def write_safetensors(path, tensors):
    """tensors: list of (name, float32 numpy array). Plain format, no extra package needed."""
    header, offset, blobs = {}, 0, []
    for name, arr in tensors:
        arr = np.ascontiguousarray(arr, dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
        blobs.append(arr.tobytes())
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - (len(text) + 8) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text.encode())
        for b in blobs:
            f.write(b)


def main():
    from sklearn.datasets import load_digits  # here, so export_onnx.py can import DigitsNet

    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    y = digits.target.astype(np.int64)
    order = rng.permutation(len(x))
    test_idx, train_idx = order[:540], order[540:]
    calib_idx = train_idx[:64]

    model = DigitsNet()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    xt, yt = torch.from_numpy(x[train_idx]), torch.from_numpy(y[train_idx])
    for epoch in range(40):
        model.train()
        perm = torch.randperm(len(xt))
        for i in range(0, len(xt), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        pred = model(torch.from_numpy(x[test_idx])).argmax(1).numpy()
    acc = float((pred == y[test_idx]).mean())
    print(f"fp32 test accuracy: {acc:.4f}")

    state = [(k, v.detach().numpy()) for k, v in model.state_dict().items()
             if v.dtype == torch.float32]
    write_safetensors(os.path.join(HERE, "model.safetensors"), state)
    write_safetensors(os.path.join(HERE, "calib.safetensors"),
                      [("images", x[calib_idx]), ("labels", y[calib_idx].astype(np.float32))])
    write_safetensors(os.path.join(HERE, "test.safetensors"),
                      [("images", x[test_idx]), ("labels", y[test_idx].astype(np.float32))])

    # Each quantizable layer's input, per calibration batch, from the float model.
    inputs = {}
    hooks = [getattr(model, n).register_forward_hook(
        lambda m, inp, out, n=n: inputs.__setitem__(n, inp[0].detach().numpy().copy()))
        for n in ("conv1", "conv2", "pool", "fc")]
    with torch.no_grad():
        for b in range(2):
            model(torch.from_numpy(x[calib_idx[b * 32:(b + 1) * 32]]))
            write_safetensors(os.path.join(HERE, f"batch{b}.safetensors"),
                              [(n, inputs[n]) for n in ("conv1", "conv2", "pool", "fc")])
    for h in hooks:
        h.remove()

    bn = lambda p: {"weight": f"{p}.weight", "bias": f"{p}.bias",
                    "running_mean": f"{p}.running_mean", "running_var": f"{p}.running_var",
                    "eps": 1e-5}
    manifest = {"layers": [
        {"name": "conv1", "type": "Conv2d", "weight": "conv1.weight", "bias": "conv1.bias",
         "stride": [1, 1], "padding": [1, 1], "dilation": [1, 1], "groups": 1,
         "batch_norm": bn("bn1"), "activation": "ReLU"},
        {"name": "conv2", "type": "Conv2d", "weight": "conv2.weight", "bias": "conv2.bias",
         "stride": [1, 1], "padding": [1, 1], "dilation": [1, 1], "groups": 1,
         "batch_norm": bn("bn2"), "activation": "ReLU"},
        {"name": "pool", "type": "AvgPool2d", "kernel_size": [2, 2], "stride": [2, 2]},
        {"name": "fc", "type": "Linear", "weight": "fc.weight", "bias": "fc.bias",
         "flatten": True},
    ], "input_shape": [1, 8, 8], "metadata": {"fp32_test_accuracy": acc, "seed": SEED}}
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
