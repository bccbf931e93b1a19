#!/usr/bin/python3
"""ptq.torch on a ResNet-18-shaped torch.nn.Module, beside its baselines, in one run.

The model: ResNet-18's 17 convolutions (conv1 7x7/2 and the 16 3x3 of the basic blocks, the
1x1 downsample convs left out so the chain runs straight), each Conv2d+BatchNorm+ReLU, global
average pooling and the 512->1000 Linear, 11.5M weights, BatchNorm statistics drawn (fixed seed);
--batches batches of 8 images at 224x224. Timed, wall clock, best of --repeat after a warm-up,
forward, ptq.torch and torch.ao one after another in each round:
  forward     the model's own forward passes over the batches (torch.no_grad, no hooks)
  ptq compute `ptq calibrate` from the files of the same layer inputs (save_inputs), its
              fusion, DMQ, weight, activation and finish phases (--timings of its fastest
              run), without reading
  ptq.torch   ptq.torch.calibrate: the hooks feed the session from the same forward passes
  ptq files   the whole `ptq calibrate` process from those files
  torch.ao    torch.ao.quantization prepare (HistogramObserver activations, per-channel
              MinMax weights: torch's closest to IFMR + ARQ), the forward passes, convert
and prints ptq.torch / (forward + ptq compute) (the issue's goal: at most 1.2),
torch.ao / ptq.torch (the goal: at least 10; both include the same forward passes, so the ratio
cannot pass (forward + torch.ao's observers) / forward), and the two calibrations' cost over
the forward passes alone.

  /usr/bin/python3 benchmarks/torch_calibrate.py [--build build] [--batches 4] [--repeat 3]
                                                 [--threads 2] [--config quant]
"""
import argparse
import copy
import os
import re
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def resnet18_chain():
    """(name, cin, cout, kernel, stride) of the 17 convs."""
    out = [("conv1", 3, 64, 7, 2)]
    cin = 64
    for stage, cout in enumerate((64, 128, 256, 512), start=1):
        for block in range(2):
            stride = 2 if stage > 1 and block == 0 else 1
            out.append((f"layer{stage}_{block}_conv1", cin, cout, 3, stride))
            out.append((f"layer{stage}_{block}_conv2", cout, cout, 3, 1))
            cin = cout
    return out


class Chain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(18)
        self.names = []
        for name, cin, cout, k, stride in resnet18_chain():
            conv = torch.nn.Conv2d(cin, cout, k, stride, padding=k // 2, bias=False)
            bn = torch.nn.BatchNorm2d(cout)
            with torch.no_grad():
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.1, 0.1)
                bn.running_mean.uniform_(-0.1, 0.1)
                bn.running_var.uniform_(0.5, 2.0)
            setattr(self, name, conv)
            setattr(self, name.replace("conv", "bn"), bn)
            setattr(self, name.replace("conv", "relu"), torch.nn.ReLU())
            self.names.append(name)
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(512, 1000)

    def forward(self, x):
        for name in self.names:
            conv = getattr(self, name)
            x = getattr(self, name.replace("conv", "relu"))(
                getattr(self, name.replace("conv", "bn"))(conv(x)))
            if name == "conv1":
                x = torch.nn.functional.max_pool2d(x, 3, 2, 1)
        return self.fc(torch.flatten(self.pool(x), 1))


def best(fn, repeat):
    """The best time of fn after a warm-up, and the result of that fastest run."""
    runs = []
    for _ in range(repeat + 1):
        t0 = time.perf_counter()
        result = fn()
        runs.append((time.perf_counter() - t0, result))
    return min(runs[1:], key=lambda run: run[0])


def interleaved(fns, repeat):
    """Best time of each of fns (name -> function) over rounds that run them one after another,
    after a warm-up round, so a drift of the machine's speed shows in all of them alike; returns
    {name: (seconds, last result)}."""
    times = {name: [] for name in fns}
    results = {}
    for _ in range(repeat + 1):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            results[name] = fn()
            times[name].append(time.perf_counter() - t0)
    return {name: (min(t[1:]), results[name]) for name, t in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--config", default="quant", choices=("quant", "quant_hfmg"))
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.build, "python"))
    import ptq
    import ptq.torch
    torch.set_num_threads(args.threads)
    model = Chain().eval()
    batches = [torch.randn(8, 3, 224, 224) for _ in range(args.batches)]
    config = ptq.parse_config(f"batch_num: {args.batches}\n" + (
        "common_config { hfmg_quantize { num_of_bins: 4096 } }\n"
        if args.config == "quant_hfmg" else ""))
    tool = os.path.join(args.build, "tools", "ptq", "ptq")
    print(f"ResNet-18-shaped chain, {args.batches} batches of 8x3x224x224, {args.threads} "
          f"threads, {args.config}, kernels {ptq.kernels}, best of {args.repeat}")

    def forward():
        with torch.no_grad():
            for b in batches:
                model(b)

    def calibrate():
        return ptq.torch.calibrate(model, config, batches, threads=args.threads)

    def torch_ao():
        from torch.ao.quantization import (HistogramObserver, PerChannelMinMaxObserver, QConfig,
                                           convert, prepare)
        m = copy.deepcopy(model)
        m.qconfig = QConfig(
            activation=HistogramObserver.with_args(reduce_range=False),
            weight=PerChannelMinMaxObserver.with_args(dtype=torch.qint8,
                                                      qscheme=torch.per_channel_symmetric))
        prepared = prepare(m)
        with torch.no_grad():
            for b in batches:
                prepared(b)
        return convert(prepared)
    timed = interleaved({"forward": forward, "ptq.torch": calibrate, "torch.ao": torch_ao},
                        args.repeat)
    t_forward, t_torch, t_ao = (timed[k][0] for k in ("forward", "ptq.torch", "torch.ao"))
    cal = timed["ptq.torch"][1]

    with tempfile.TemporaryDirectory(prefix="ptq-bench-torch-") as d:
        saved = ptq.torch.calibrate(model, config, batches, threads=args.threads,
                                    save_inputs=d)
        assert saved.record.text() == cal.record.text()
        command = [tool, "calibrate", os.path.join(d, "quant.cfg"), "--model",
                   os.path.join(d, "manifest.json"), "--weights",
                   os.path.join(d, "weights.safetensors"), "--batches"] + [
            os.path.join(d, f"batch{b}.safetensors") for b in range(args.batches)] + [
            "--threads", str(args.threads), "--timings", "--quiet", "--record",
            os.path.join(d, "record.txt")]

        def files():
            return subprocess.run(command, capture_output=True, text=True, check=True)
        t_files, run = best(files, args.repeat)
        with open(os.path.join(d, "record.txt"), encoding="utf-8") as f:
            assert f.read() == cal.record.text(), "ptq calibrate gave another record"
    parts = dict((k, float(v)) for k, v in re.findall(r"(\w+) ([0-9.]+) s", run.stderr))
    t_compute = sum(parts.get(k, 0.0) for k in ("fusion", "dmq", "weights", "activations",
                                                "finish"))

    print(f"  forward      {t_forward:8.3f} s   the model's own forward passes")
    print(f"  ptq compute  {t_compute:8.3f} s   ptq calibrate's phases on the same inputs")
    print(f"  ptq.torch    {t_torch:8.3f} s   = {t_torch / (t_forward + t_compute):.2f} x "
          "(forward + ptq compute)   goal <= 1.2")
    print(f"  ptq files    {t_files:8.3f} s   whole process from the saved inputs")
    print(f"  torch.ao     {t_ao:8.3f} s   = {t_ao / t_torch:.1f} x ptq.torch   goal >= 10")
    print(f"  over the forward passes: ptq.torch {t_torch - t_forward:.3f} s, torch.ao "
          f"{t_ao - t_forward:.3f} s = {(t_ao - t_forward) / (t_torch - t_forward):.1f} x")


if __name__ == "__main__":
    main()
