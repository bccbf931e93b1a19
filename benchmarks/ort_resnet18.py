#!/usr/bin/python3
"""ONNX Runtime (CPU) on ptq's QDQ model of a ResNet-18, beside the float model in the same run.

Two models, both with the weights and BatchNorm statistics benchmarks/resnet18_calibrate.py
draws (fixed seed, no download), written as torch modules and exported to ONNX with
torch.onnx.export (opset 13, TrainingMode.PRESERVE, do_constant_folding=False: the flags ptq's
exporter needs, docs/deploy.md):
  - plain:    resnet18_calibrate.py's model: its 17 Conv2d+BN+ReLU after a max pool, global
              average pooling and the 512->1000 Linear;
  - residual: ResNet-18 as torchvision builds it: the same 17 convolutions in basic blocks with
              their residual Adds and the three 1x1 downsample convolutions (20 Conv2d + Linear).
Each is calibrated by `ptq calibrate` from files (IFMR, ARQ per channel; the layer inputs of
--batches forward passes of random images, dumped with forward hooks) and exported with
`--onnx model.onnx --export onnx-qdq=...` (the onnxruntime default: 8-bit weights as uint8,
ONNX Runtime's uint8 x uint8 kernels), and once more by `ptq export --weight-type int8` (its
uint8 x int8 kernels, faster but saturating on x86 CPUs without VNNI: docs/deploy.md). Then,
for 1 and 2 intra-op threads, batch --batch images at 224x224, it times --repeat runs of each
model after a warm-up, three rounds with the models interleaved, and prints the best round's
median (milliseconds: this virtual machine's neighbours slow a round now and then) and FP32 /
int8, the int8 kernels ONNX
Runtime's optimizer made and the float ops left. --profile writes ONNX Runtime's profile of
the int8 models and prints the time per op type.

  /usr/bin/python3 benchmarks/ort_resnet18.py --build build [--ort-modules build/ort/node_modules]
                                              [--repeat 10] [--batch 8] [--keep DIR] [--profile]
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import resnet18_calibrate as plain_layers  # noqa: E402  (the layer list and its weights)


class Block(torch.nn.Module):
    def __init__(self, cin, cout, stride, residual):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.residual = residual
        self.downsample = None
        if residual and (stride != 1 or cin != cout):
            self.downsample = torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 1, stride, bias=False),
                                                  torch.nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        if self.residual:
            y = y + (self.downsample(x) if self.downsample is not None else x)
        return torch.relu(y)


class ResNet18(torch.nn.Module):
    def __init__(self, residual):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(64)
        self.maxpool = torch.nn.MaxPool2d(3, 2, 1)
        cin = 64
        for stage, cout in enumerate((64, 128, 256, 512), start=1):
            stride = 1 if stage == 1 else 2
            setattr(self, f"layer{stage}", torch.nn.Sequential(Block(cin, cout, stride, residual),
                                                               Block(cout, cout, 1, residual)))
            cin = cout
        self.avgpool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(512, 1000)

    def forward(self, x):
        x = self.maxpool(torch.relu(self.bn1(self.conv1(x))))
        for stage in range(1, 5):
            x = getattr(self, f"layer{stage}")(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def seeded(model):
    """resnet18_calibrate.py's draws for its 17 convolutions, BatchNorms and the Linear; the
    downsample layers get the same kind of draws from a second generator."""
    rng = np.random.default_rng(18)
    state = model.state_dict()
    for name, cin, cout, k, _, _ in plain_layers.layers():
        state[name + ".weight"] = torch.from_numpy(
            rng.normal(0, np.sqrt(2.0 / (cin * k * k)), (cout, cin, k, k)).astype(np.float32))
        bn = name.replace("conv", "bn")
        state[bn + ".weight"] = torch.from_numpy(rng.uniform(0.5, 1.5, cout).astype(np.float32))
        state[bn + ".bias"] = torch.from_numpy(rng.normal(0, 0.1, cout).astype(np.float32))
        state[bn + ".running_mean"] = torch.from_numpy(rng.normal(0, 0.1, cout).astype(np.float32))
        state[bn + ".running_var"] = torch.from_numpy(rng.uniform(0.5, 2.0, cout).astype(np.float32))
    state["fc.weight"] = torch.from_numpy(rng.normal(0, np.sqrt(1.0 / 512), (1000, 512))
                                          .astype(np.float32))
    state["fc.bias"] = torch.from_numpy(rng.normal(0, 0.01, 1000).astype(np.float32))
    extra = np.random.default_rng(19)
    for name in state:
        if ".downsample.0.weight" in name:
            cout, cin = state[name].shape[:2]
            state[name] = torch.from_numpy(extra.normal(0, np.sqrt(2.0 / cin), (cout, cin, 1, 1))
                                           .astype(np.float32))
        elif ".downsample.1." in name and not name.endswith("num_batches_tracked"):
            n = state[name].shape[0]
            draw = {"weight": lambda: extra.uniform(0.5, 1.5, n),
                    "bias": lambda: extra.normal(0, 0.1, n),
                    "running_mean": lambda: extra.normal(0, 0.1, n),
                    "running_var": lambda: extra.uniform(0.5, 2.0, n)}[name.rsplit(".", 1)[1]]
            state[name] = torch.from_numpy(draw().astype(np.float32))
    model.load_state_dict(state)
    return model.eval()


def quantizable(model):
    return [(n, m) for n, m in model.named_modules()
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]


def manifest_of(model):
    layers = []
    modules = dict(model.named_modules())
    for name, m in quantizable(model):
        if isinstance(m, torch.nn.Linear):
            layers.append({"name": name, "type": "Linear", "weight": name + ".weight",
                           "bias": name + ".bias", "flatten": True})
            continue
        bn = name.replace("conv", "bn") if ".downsample" not in name else name[:-1] + "1"
        layers.append({"name": name, "type": "Conv2d", "weight": name + ".weight",
                       "stride": list(m.stride), "padding": list(m.padding),
                       "batch_norm": {"weight": bn + ".weight", "bias": bn + ".bias",
                                      "running_mean": bn + ".running_mean",
                                      "running_var": bn + ".running_var", "eps": 1e-5}})
        assert bn in modules, bn
    return {"layers": layers}


def save_inputs(model, batches, images, d):
    """Each quantizable layer's input for `batches` forward passes of random images."""
    rng = np.random.default_rng(7)
    seen = {}
    hooks = [m.register_forward_hook(lambda mod, inp, out, n=n: seen.__setitem__(
        n, inp[0].detach().numpy().copy())) for n, m in quantizable(model)]
    files = []
    with torch.no_grad():
        for b in range(batches):
            x = rng.standard_normal((images, 3, 224, 224)).astype(np.float32)
            model(torch.from_numpy(x))
            path = os.path.join(d, f"batch{b}.safetensors")
            plain_layers.save_safetensors(path, dict(seen))
            files.append(path)
    for h in hooks:
        h.remove()
    return files


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"ort_resnet18.py: {' '.join(cmd[:3])}... exited with {p.returncode}:\n"
                 f"{p.stderr[-2000:]}")
    return p


def prepare(kind, d, ptq, batches):
    model = seeded(ResNet18(residual=kind == "residual"))
    onnx_path = os.path.join(d, "model.onnx")
    torch.onnx.export(model, torch.zeros(1, 3, 224, 224), onnx_path, opset_version=13,
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False,
                      input_names=["images"], output_names=["logits"],
                      dynamic_axes={"images": {0: "n"}, "logits": {0: "n"}})
    state = {k: v.numpy() for k, v in model.state_dict().items() if v.dtype == torch.float32}
    plain_layers.save_safetensors(os.path.join(d, "weights.safetensors"), state)
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(manifest_of(model), f, indent=1)
    files = save_inputs(model, batches, 8, d)
    cfg = os.path.join(d, "ifmr.cfg")
    with open(cfg, "w") as f:
        f.write(plain_layers.configs(batches)["ifmr"])
    qdq = os.path.join(d, "qdq.onnx")
    record = os.path.join(d, "record.txt")
    run([ptq, "calibrate", cfg, "--model", os.path.join(d, "manifest.json"), "--weights",
         os.path.join(d, "weights.safetensors"), "--batches", *files, "--quiet", "--onnx",
         onnx_path, "--export", "onnx-qdq=" + qdq, "--record", record])
    qdq_s8 = os.path.join(d, "qdq_int8_weights.onnx")
    run([ptq, "export", "--format", "onnx-qdq", "--onnx", onnx_path, "--record", record,
         "--model", os.path.join(d, "manifest.json"), "--config", cfg, "--weight-type", "int8",
         "-o", qdq_s8])
    return onnx_path, qdq, qdq_s8, len(quantizable(model))


def ort_time(node_env, model, x_path, shape, threads, repeat, optimized=None, profile=None):
    cmd = ["node", os.path.join(HERE, "..", "tests", "tools", "ort", "ort_run.js"), model,
           "images", x_path, ",".join(map(str, shape)), x_path + ".out", "--threads",
           str(threads), "--repeat", str(repeat)]
    if optimized:
        cmd += ["--optimized", optimized]
    if profile:
        cmd += ["--profile", profile]
    summary = json.loads(run(cmd, node_env).stdout)
    return float(np.median(summary["times_ms"])), summary


def op_census(path):
    import onnx
    return collections.Counter(n.op_type for n in onnx.load(path).graph.node)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--ort-modules", help="node_modules with onnxruntime-node "
                                          "(default: BUILD/ort/node_modules)")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--batches", type=int, default=2, help="calibration batches of 8 images")
    ap.add_argument("--models", default="plain,residual")
    ap.add_argument("--keep", help="work in this folder instead of a temporary one")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    ptq = os.path.join(a.build, "tools", "ptq", "ptq")
    modules = a.ort_modules or os.path.join(a.build, "ort", "node_modules")
    if not os.access(ptq, os.X_OK):
        sys.exit(f"ort_resnet18.py: no ptq binary at '{ptq}' (build it, or pass --build)")
    if not os.path.isfile(os.path.join(modules, "onnxruntime-node", "package.json")):
        sys.exit(f"ort_resnet18.py: no onnxruntime-node in '{modules}' (tools/install-deps.sh "
                 "--ort BUILD/ort installs it)")
    node_env = dict(os.environ, NODE_PATH=os.path.abspath(modules))
    tmp = None if a.keep else tempfile.TemporaryDirectory(prefix="ptq-ort-resnet18-")
    root = a.keep or tmp.name
    x = np.random.default_rng(3).standard_normal((a.batch, 3, 224, 224)).astype(np.float32)
    print(f"ONNX Runtime CPU, batch {a.batch} at 224x224, the best of 3 interleaved rounds of "
          f"the median of {a.repeat} runs after a warm-up; `ptq calibrate` IFMR + ARQ per "
          f"channel on {a.batches} batches of 8 random images; QDQ: the onnxruntime default "
          "(fused placement, uint8)")
    for kind in a.models.split(","):
        d = os.path.join(root, kind)
        os.makedirs(d, exist_ok=True)
        fp32, qdq, qdq_s8, layers = prepare(kind, d, ptq, a.batches)
        x_path = os.path.join(d, "x.f32")
        x.tofile(x_path)
        optimized = os.path.join(d, "qdq.optimized.onnx")
        for threads in (1, 2):
            best = {}
            for _ in range(3):  # interleaved rounds: a slow moment hits one round of each
                for key, path, opt in (("fp32", fp32, None), ("int8", qdq, optimized),
                                       ("s8", qdq_s8, None)):
                    t, _ = ort_time(node_env, path, x_path, x.shape, threads, a.repeat, opt)
                    best[key] = min(best.get(key, t), t)
            t_fp32, t_int8, t_s8 = best["fp32"], best["int8"], best["s8"]
            print(f"{kind:8} ({layers} layers) {threads} thread(s): FP32 {t_fp32:7.1f} ms; "
                  f"int8 (uint8 weights) {t_int8:7.1f} ms, FP32 / int8 = {t_fp32 / t_int8:.2f}; "
                  f"--weight-type int8 {t_s8:7.1f} ms, {t_fp32 / t_s8:.2f}")
        ops = op_census(optimized)
        kernels = {k: v for k, v in ops.items() if k.startswith("QLinear") or k in
                   ("QGemm", "MatMulIntegerToFloat")}
        floats = {k: v for k, v in ops.items() if k in ("Conv", "FusedConv", "Gemm", "MatMul",
                                                       "NchwcConv", "FusedGemm")}
        rest = {k: v for k, v in ops.items() if k not in kernels and k not in floats}
        print(f"  int8 kernels {dict(sorted(kernels.items()))}; float Conv/Gemm "
              f"{dict(sorted(floats.items())) or 'none'}; other ops {dict(sorted(rest.items()))}")
        if a.profile:
            for label, path in (("FP32", fp32), ("int8", qdq), ("--weight-type int8", qdq_s8)):
                prefix = os.path.join(d, "profile_" + os.path.basename(path)[:-5])
                _, summary = ort_time(node_env, path, x_path, x.shape, 1, 2, profile=prefix)
                with open(summary["profile"]) as f:
                    events = json.load(f)
                per_op = collections.Counter()
                for e in events:
                    if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
                        per_op[e["args"]["op_name"]] += e["dur"]
                total = sum(per_op.values())
                print(f"  profile, {label}, 1 thread: {total / 3000:.1f} ms per run in kernels: " +
                      ", ".join(f"{op} {100 * t / total:.1f} %" for op, t in per_op.most_common(5)))
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
