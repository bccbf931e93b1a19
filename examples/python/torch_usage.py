"""ptq from PyTorch on a model of its own: a small CNN (Conv+BN+ReLU, a depthwise conv with
ReLU6, average pooling, two Linears) calibrated with ptq.torch from its own forward passes, the
toolkit's API (ptq.amct) on the same model, the bindings on tensors, and the automatic
calibration. docs/python.md shows the regions between the [doc:...] markers; the python tests run
this file (ctest python_example) and tests/package checks that the docs are this text.

    PYTHONPATH=<build>/python /usr/bin/python3 examples/python/torch_usage.py
"""
import os
import tempfile

import numpy as np
import torch

import ptq
import ptq.amct as amct
import ptq.torch


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)
        self.relu = torch.nn.ReLU()
        self.depthwise = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.relu6 = torch.nn.ReLU6()
        self.pool = torch.nn.AvgPool2d(2)
        self.fc1 = torch.nn.Linear(8 * 4 * 4, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        x = self.relu(self.bn(self.conv(x)))
        x = self.pool(self.relu6(self.depthwise(x)))
        return self.fc2(torch.relu(self.fc1(torch.flatten(x, 1))))


def main():
    torch.manual_seed(0)
    model = SmallNet().eval()
    with torch.no_grad():  # a BatchNorm with statistics of its own
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    data = [torch.randn(16, 3, 8, 8) for _ in range(3)]
    config = ptq.parse_config("batch_num: 2\n"
                              "common_config { arq_quantize { channel_wise: true } }\n")

    # [doc:torch]
    cal = ptq.torch.calibrate(model, config, data[:2])  # your model, your batches
    print(cal.record.text()[:60])                       # the toolkit's record
    fused = cal.model                                   # BN folded, weights fake-quantized
    fused.load_state_dict(cal.state_dict(), strict=True)
    fake_quant = cal.fake_quant_model()                 # inputs quantized as well
    with torch.no_grad():
        drift = (fake_quant(data[2]) - model(data[2])).abs().max().item()
    # [/doc:torch]
    print(f"ptq.torch: {len(cal.record.layers)} layers, max output drift {drift:.4f}")
    assert drift < 0.1, drift

    # [doc:bindings]
    observer = ptq.HfmgObserver(num_of_bins=2048)       # the numerics on any tensors:
    observer.observe(torch.randn(64, 32).t())           # a transposed torch tensor,
    observer.observe(np.ones((4, 4), np.float16))       # a float16 numpy array: no copy
    print(observer.estimate())                          # scale, offset, bits, clip range
    try:
        ptq.parse_config("batch_num: 0\n", "quant.cfg")
    except ptq.Error as e:                              # every error: code and position
        print(e.code, e.path, e.line, e.column, e.message)
    # [/doc:bindings]

    with tempfile.TemporaryDirectory() as work:
        # [doc:amct]
        amct.create_quant_config(os.path.join(work, "config.json"), model, data[0])
        calib = amct.quantize_model(os.path.join(work, "config.json"),
                                    os.path.join(work, "modified.onnx"),
                                    os.path.join(work, "record.txt"), model, data[0])
        calib(data[0])                                  # batch_num (1) batches
        amct.save_model(os.path.join(work, "modified.onnx"), os.path.join(work, "record.txt"),
                        os.path.join(work, "small"))    # small_deploy_model.onnx, ...
        # [/doc:amct]
        print("ptq.amct:", sorted(f for f in os.listdir(work) if f.startswith("small")))

    def top1_agreement(m):  # the "accuracy": agreement with the float model's classes
        with torch.no_grad():
            return (m(data[2]).argmax(1) == model(data[2]).argmax(1)).float().mean().item()

    # [doc:auto]
    auto = ptq.torch.auto_calibrate(model, config, data[:2], evaluate=top1_agreement,
                                    max_drop=0.0)       # keep every class
    print(auto.skip_layers, len(auto.steps), "evaluations")
    # [/doc:auto]
    assert len(auto.steps) <= 2 + int(np.log2(len(auto.ranking)))


if __name__ == "__main__":
    main()
