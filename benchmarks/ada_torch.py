#!/usr/bin/python3
"""AdaRound iterations per second: ptq's `ada_round` beside the same iteration in PyTorch.

For each layer of benchmarks/ada_shapes.hpp (Linear 512->512 with 1024 samples; Conv2d 64->64
3x3, depthwise Conv2d 128 3x3 and ConvTranspose2d 64->32 4x4 stride 2 with 256 samples each),
on 1 and 2 threads, in interleaved rounds (best of --rounds):
  - ptq:   build/benchmarks/ptq_bench_ada for that layer and thread count, --iterations
           iterations (PTQ_BENCH_ADA_ITERATIONS), its own iterations/s, layer GFLOP/s and the
           machine's multiply-add peak measured in the same process;
  - torch: the toolkit's AdaRound iteration written in PyTorch, the baseline: a minibatch of 32
           samples, the soft weight clamp(floor(W/s) + h(alpha), -128, 127)*s with
           h = clamp(sigmoid(alpha)*1.2 - 0.1, 0, 1), the layer, ReLU, the squared error against
           the float target summed over channels and averaged over the rest, after the warm
           start (20 %) plus 0.01*sum(1 - |2h - 1|^beta) with beta annealed from 20 to 2, backward
           to alpha and an Adam step (torch.optim.Adam, lr 1e-3), torch.set_num_threads(threads).
Prints iterations/s of both and ptq / torch (the goal: >= 1 on every layer), and ptq's GFLOP/s
as a fraction of the peak (the goal: >= 0.6 for the GEMM-bound layers). ptq's time includes
its KL initial scale and final rounding (a few ms), torch's only the iterations.

  /usr/bin/python3 benchmarks/ada_torch.py [--build build] [--iterations 200] [--rounds 3]
                                           [--threads 1,2] [--layers conv,linear,...]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

# name: (ptq benchmark, layer kind, in channels, out channels, kernel, stride, padding, groups,
#        input spatial size, samples)
LAYERS = {
    "linear": ("BM_ada_linear512_1024_samples", "linear", 512, 512, 1, 1, 0, 1, 1, 1024),
    "conv": ("BM_ada_conv64_3x3_16x16_256_samples", "conv", 64, 64, 3, 1, 1, 1, 16, 256),
    "depthwise": ("BM_ada_depthwise128_3x3_32x32_256_samples", "conv", 128, 128, 3, 1, 1, 128,
                  32, 256),
    "convtranspose": ("BM_ada_convtranspose64_32_4x4_s2_16x16_256_samples", "convtranspose", 64,
                      32, 4, 2, 1, 1, 16, 256),
}
BATCH = 32
ZETA, GAMMA = 1.1, -0.1
REG_PARAM, BETA_START, BETA_END, WARM_START = 0.01, 20.0, 2.0, 0.2


def layer_fn(kind, stride, padding, groups):
    if kind == "linear":
        return lambda x, w, b: F.linear(x, w, b)
    if kind == "conv":
        return lambda x, w, b: F.conv2d(x, w, b, stride=stride, padding=padding, groups=groups)
    return lambda x, w, b: F.conv_transpose2d(x, w, b, stride=stride, padding=padding,
                                              groups=groups)


def torch_rate(name, iterations, threads):
    """Iterations per second of the PyTorch AdaRound loop on layer `name`."""
    _, kind, cin, cout, k, stride, padding, groups, size, samples = LAYERS[name]
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    if kind == "linear":
        w = torch.randn(cout, cin, generator=g) * 0.05
        x = torch.randn(samples, cin, generator=g)
    elif kind == "conv":
        w = torch.randn(cout, cin // groups, k, k, generator=g) * 0.05
        x = torch.randn(samples, cin, size, size, generator=g)
    else:
        w = torch.randn(cin, cout // groups, k, k, generator=g) * 0.05
        x = torch.randn(samples, cin, size, size, generator=g)
    b = torch.randn(cout, generator=g) * 0.1
    layer = layer_fn(kind, stride, padding, groups)
    with torch.no_grad():
        target = torch.relu(layer(x, w, b))
        # One scale per output channel (max |w| / 127), shaped to broadcast over the weight.
        out_axis = 1 if kind == "convtranspose" else 0
        dims = [d for d in range(w.dim()) if d != out_axis]
        shape = [1] * w.dim()
        shape[out_axis] = w.shape[out_axis]
        s = (w.abs().amax(dim=dims) / 127.0).clamp_min(1e-8).reshape(shape)
        w_floor = torch.floor(w / s)
        frac = (w / s - w_floor).clamp(0.01, 0.99)
        alpha0 = -torch.log((ZETA - GAMMA) / (frac - GAMMA) - 1.0)
    alpha = alpha0.clone().requires_grad_(True)
    opt = torch.optim.Adam([alpha], lr=1e-3)
    warm = int(WARM_START * iterations)

    def step(t):
        idx = torch.randperm(samples, generator=g)[:BATCH]
        h = torch.clamp(torch.sigmoid(alpha) * (ZETA - GAMMA) + GAMMA, 0.0, 1.0)
        w_soft = torch.clamp(w_floor + h, -128.0, 127.0) * s
        out = torch.relu(layer(x[idx], w_soft, b))
        diff = out - target[idx]
        recon = diff.pow(2).sum(1).mean()
        loss = recon
        if t >= warm:
            beta = BETA_END + 0.5 * (BETA_START - BETA_END) * (
                1.0 + math.cos(math.pi * (t - warm) / max(1, iterations - warm)))
            loss = recon + REG_PARAM * (1.0 - (2.0 * h - 1.0).abs().pow(beta)).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for t in range(3):  # warm-up: allocator, kernels
        step(t)
    t0 = time.perf_counter()
    for t in range(iterations):
        step(t)
    return iterations / (time.perf_counter() - t0)


def ptq_rate(build, name, iterations, threads):
    """ptq_bench_ada's counters for layer `name` on `threads` threads."""
    exe = os.path.join(build, "benchmarks", "ptq_bench_ada")
    if not os.access(exe, os.X_OK):
        sys.exit(f"ada_torch.py: {exe} not found; build it first (bash tools/test.sh, or "
                 "cmake --build BUILD --target ptq_bench_ada with -DPTQ_BUILD_BENCHMARKS=ON)")
    env = dict(os.environ, PTQ_BENCH_ADA_ITERATIONS=str(iterations))
    env.pop("PTQ_BENCH_SMOKE", None)
    out = subprocess.run([exe, f"--benchmark_filter=^{LAYERS[name][0]}/{threads}/",
                          "--benchmark_format=json"], env=env, check=True,
                         capture_output=True, text=True).stdout
    runs = json.loads(out)["benchmarks"]
    if len(runs) != 1:
        sys.exit(f"ada_torch.py: expected one run of {LAYERS[name][0]}/{threads}, got {len(runs)}")
    r = runs[0]
    return r["ada_iterations_per_s"], r["GFLOPs"], r["peak_GFLOPs"], r.get("label", "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--layers", default=",".join(LAYERS))
    a = ap.parse_args()
    layers = a.layers.split(",")
    for name in layers:
        if name not in LAYERS:
            sys.exit(f"ada_torch.py: unknown layer '{name}' (one of {', '.join(LAYERS)})")
    threads = [int(t) for t in a.threads.split(",")]
    best = {}
    label = ""
    for _ in range(a.rounds):
        for name in layers:
            for t in threads:
                p, gflops, peak, label = ptq_rate(a.build, name, a.iterations, t)
                q = torch_rate(name, a.iterations, t)
                old = best.get((name, t))
                best[(name, t)] = (max(p, old[0]) if old else p, max(gflops, old[1]) if old else
                                   gflops, peak, max(q, old[3]) if old else q)
    print(f"AdaRound, {a.iterations} iterations, minibatches of {BATCH}, best of {a.rounds} "
          f"interleaved rounds; ptq: {label}; torch {torch.__version__}")
    print(f"{'layer':<15}{'threads':>8}{'ptq it/s':>11}{'torch it/s':>12}{'ptq/torch':>11}"
          f"{'ptq GFLOP/s':>13}{'of peak':>9}")
    for name in layers:
        for t in threads:
            p, gflops, peak, q = best[(name, t)]
            print(f"{name:<15}{t:>8}{p:>11.1f}{q:>12.1f}{p / q:>11.2f}{gflops:>13.1f}"
                  f"{gflops / peak:>9.2f}")


if __name__ == "__main__":
    main()
