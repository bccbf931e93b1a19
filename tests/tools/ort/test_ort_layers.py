#!/usr/bin/env python3
"""ort_layers: every layer kind of the manifest, calibrated from files and exported to QDQ,
in ONNX Runtime (CPU): models built here with python3-onnx (seeded weights), their layer
inputs computed by ONNX Runtime itself (the float model with each layer's input as an output).
    test_ort_layers.py PTQ

- a 2-D net: Conv+BatchNorm+ReLU, a depthwise Conv with ReLU6 (Clip), a 1x1 Conv into a
  residual Add, an AvgPool2d layer, a strided Conv, global average pooling, a Gemm Linear
  (DMQ, folded into the strided Conv through ReLU, GlobalAveragePool and Flatten) and a MatMul
  Linear with its bias in an Add;
- Conv1d and Conv3d nets;
- a ConvTranspose2d between two Convs (ONNX Runtime 1.30 has no CPU int8 ConvTranspose: it
  stays float, and only it).
Checks: ONNX Runtime's optimized graph runs every other quantized layer as an int8 kernel and
holds no float Conv, Gemm or MatMul; the int8 model's outputs agree with the exact form's
(--placement inputs --dmq exact, run without optimizations: ptq's fake-quant arithmetic) to
30 dB SQNR or better; the DMQ fold and its W1255 Div are where this docstring says.
"""
import json
import os
import struct
import sys

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as nh

from ort_common import FLOAT_LAYER_OPS, INT8_OPS, Ort, check, fail, run, tmpdir

RNG = np.random.default_rng(20261202)


def f32(shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def write_safetensors(path, tensors):
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


class Net:
    """A graph under construction, with its manifest and each layer's input tensor."""

    def __init__(self, x_shape):
        self.x_shape = x_shape
        self.nodes, self.inits, self.layers, self.inputs = [], {}, [], {}
        self.k_by_n = set()  # MatMul weights: K x N in the model, N x K in the weights file
        self.t = "x"

    def const(self, name, a):
        self.inits[name] = a
        return name

    def op(self, op, inputs, name, **attrs):
        out = name + "_out"
        self.nodes.append(oh.make_node(op, inputs, [out], name=name, **attrs))
        self.t = out
        return out

    def conv(self, name, cin, cout, k, dims=2, groups=1, stride=1, pad=None, bn=False,
             transpose=False, activation=None):
        pad = k // 2 if pad is None else pad
        kshape = (cin, cout // groups) if transpose else (cout, cin // groups)
        w = self.const(name + ".weight", f32(kshape + (k,) * dims, np.sqrt(2.0 / (cin * k))))
        b = self.const(name + ".bias", f32((cout,), 0.1))
        self.inputs[name] = self.t
        layer = {"name": name, "type": ("ConvTranspose" if transpose else "Conv") + f"{dims}d",
                 "weight": w, "bias": b, "groups": groups, "stride": [stride] * dims,
                 "padding": [pad] * dims}
        self.op("ConvTranspose" if transpose else "Conv", [self.t, w, b], name, group=groups,
                strides=[stride] * dims, pads=[pad] * dims * 2, kernel_shape=[k] * dims)
        if bn:
            names = [self.const(f"{name}_bn.{p}", v) for p, v in (
                ("weight", RNG.uniform(0.5, 1.5, cout).astype(np.float32)),
                ("bias", f32((cout,), 0.1)), ("running_mean", f32((cout,), 0.1)),
                ("running_var", RNG.uniform(0.5, 2.0, cout).astype(np.float32)))]
            self.op("BatchNormalization", [self.t] + names, name + "_bn")
            layer["batch_norm"] = dict(zip(("weight", "bias", "running_mean", "running_var"),
                                           names), eps=1e-5)
        if activation == "relu":
            self.op("Relu", [self.t], name + "_relu")
        elif activation == "relu6":
            self.op("Clip", [self.t, self.const(name + "_lo", np.float32(0)),
                             self.const(name + "_hi", np.float32(6))], name + "_relu6")
        self.layers.append(layer)

    def linear(self, name, cin, cout, matmul=False, activation=None):
        self.inputs[name] = self.t
        b = self.const(name + ".bias", f32((cout,), 0.1))
        layer = {"name": name, "type": "Linear", "bias": b}
        if matmul:  # MatMul with a K x N weight, the bias in an Add after it
            w = self.const(name + ".weight", f32((cin, cout), np.sqrt(1.0 / cin)))
            self.k_by_n.add(w)
            self.op("MatMul", [self.t, w], name)
            self.op("Add", [self.t, b], name + "_bias")
        else:
            w = self.const(name + ".weight", f32((cout, cin), np.sqrt(1.0 / cin)))
            self.op("Gemm", [self.t, w, b], name, transB=1)
        layer["weight"] = w
        if activation == "relu":
            self.op("Relu", [self.t], name + "_relu")
        self.layers.append(layer)

    def pool_layer(self, name, k):
        self.inputs[name] = self.t
        self.op("AveragePool", [self.t], name, kernel_shape=[k, k], strides=[k, k])
        self.layers.append({"name": name, "type": "AvgPool2d", "kernel_size": [k, k],
                            "stride": [k, k]})

    def model(self, outputs=()):
        """The model, its outputs typed by ONNX's shape inference (as exporters write them)."""
        g = oh.make_graph(
            self.nodes, "net", [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                          ["N"] + list(self.x_shape))],
            [], [nh.from_array(v, k) for k, v in self.inits.items()])
        m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)], ir_version=7)
        inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(m).graph.value_info}
        m.graph.output.extend([inferred[t] for t in [self.t] + list(outputs)])
        onnx.checker.check_model(m, full_check=True)
        return m


def net_2d():
    n = Net((3, 12, 12))
    n.conv("a", 3, 8, 3, bn=True, activation="relu")
    skip = n.t
    n.conv("dw", 8, 8, 3, groups=8, activation="relu6")
    n.conv("pw", 8, 8, 1)
    n.op("Add", [n.t, skip], "residual")
    n.op("Relu", [n.t], "residual_relu")
    n.pool_layer("pool", 2)
    n.conv("c3", 8, 16, 3, stride=2, activation="relu")
    n.op("GlobalAveragePool", [n.t], "gap")
    n.op("Flatten", [n.t], "flatten")
    n.linear("fc1", 16, 32, activation="relu")
    n.linear("fc2", 32, 10, matmul=True)
    return n


def net_1d():
    n = Net((4, 16))
    n.conv("c1", 4, 8, 3, dims=1, activation="relu")
    n.conv("c2", 8, 8, 3, dims=1, activation="relu")
    n.op("Flatten", [n.t], "flatten")
    n.linear("fc", 128, 5)
    return n


def net_3d():
    n = Net((2, 6, 6, 6))
    n.conv("c1", 2, 4, 3, dims=3, activation="relu")
    n.conv("c2", 4, 4, 3, dims=3, activation="relu")
    n.op("GlobalAveragePool", [n.t], "gap")
    n.op("Flatten", [n.t], "flatten")
    n.linear("fc", 4, 3)
    return n


def net_transpose():
    n = Net((4, 6, 6))
    n.conv("c1", 4, 4, 3, activation="relu")
    n.conv("up", 4, 4, 2, stride=2, pad=0, transpose=True, activation="relu")
    n.conv("c2", 4, 4, 3, activation="relu")
    n.op("Flatten", [n.t], "flatten")
    n.linear("fc", 4 * 12 * 12, 3)
    return n


CONFIG = """batch_num: 2
common_config {
  arq_quantize { channel_wise: true }
  ifmr_quantize { search_range_start: 0.7 search_range_end: 1.3 search_step: 0.01
                  max_percentile: 0.999999 min_percentile: 0.999999 asymmetric: true }
}
"""
# The 2-D net: DMQ on fc1 (folded) and pw (kept as a Div: a Clip is before it).
DMQ_2D = """override_layer_configs {
  layer_name: "fc1"
  calibration_config {
    arq_quantize { channel_wise: false }
    ifmr_quantize { search_range_start: 0.7 search_range_end: 1.3 search_step: 0.01
                    max_percentile: 0.999999 min_percentile: 0.999999 asymmetric: true }
    dmq_balancer { migration_strength: 0.5 }
  }
}
override_layer_configs {
  layer_name: "pw"
  calibration_config {
    arq_quantize { channel_wise: true }
    ifmr_quantize { search_range_start: 0.7 search_range_end: 1.3 search_step: 0.01
                    max_percentile: 0.999999 min_percentile: 0.999999 asymmetric: true }
    dmq_balancer { migration_strength: 0.5 }
  }
}
"""


def sqnr_db(ref, x):
    noise = float(((ref - x) ** 2).sum())
    return float("inf") if noise == 0 else 10 * np.log10(float((ref ** 2).sum()) / noise)


def check_net(ptq, ort, name, net, float_layers=(), config=CONFIG):
    work = tmpdir()
    model_path = os.path.join(work, "model.onnx")
    onnx.save(net.model(), model_path)
    with open(os.path.join(work, "manifest.json"), "w") as f:
        json.dump({"layers": net.layers}, f)
    with open(os.path.join(work, "quant.cfg"), "w") as f:
        f.write(config)
    # Each layer's input, from the float model in ONNX Runtime.
    probe = os.path.join(work, "probe.onnx")
    onnx.save(net.model(outputs=sorted(set(net.inputs.values()) - {"x"})), probe)
    batches = []
    for b in range(2):
        x = f32((16,) + net.x_shape)
        outs, _ = ort.run(probe, x, input_name="x", level="disabled")
        outs["x"] = x
        path = os.path.join(work, f"batch{b}.safetensors")
        write_safetensors(path, {layer: outs[t] for layer, t in net.inputs.items()})
        batches.append(path)
    weights = os.path.join(work, "weights.safetensors")
    write_safetensors(weights, {k: v.T if k in net.k_by_n else v
                                for k, v in net.inits.items() if v.ndim > 0})
    qdq, exact = os.path.join(work, "qdq.onnx"), os.path.join(work, "exact.onnx")
    p = run([ptq, "calibrate", os.path.join(work, "quant.cfg"), "--model",
             os.path.join(work, "manifest.json"), "--weights", weights, "--batches", *batches,
             "--record", os.path.join(work, "record.txt"), "--quiet", "--onnx", model_path,
             "--export", "onnx-qdq=" + qdq])
    run([ptq, "export", "--format", "onnx-qdq", "--onnx", model_path, "--record",
         os.path.join(work, "record.txt"), "--model", os.path.join(work, "manifest.json"),
         "--config", os.path.join(work, "quant.cfg"), "--placement", "inputs", "--dmq",
         "exact", "-o", exact])
    x = f32((32,) + net.x_shape)
    optimized = os.path.join(work, "optimized.onnx")
    got, _ = ort.run(qdq, x, input_name="x", optimized=optimized)
    want, _ = ort.run(exact, x, input_name="x", level="disabled")
    (out_name,) = got
    db = sqnr_db(want[out_name], got[out_name])
    check(db >= 30.0, f"{name}: the int8 model's output is {db:.1f} dB from the exact form's")
    opt = onnx.load(optimized)
    ops = [n.op_type for n in opt.graph.node]
    for layer in net.layers:
        kernels = [n.op_type for n in opt.graph.node if n.op_type in INT8_OPS and
                   n.name.startswith(layer["name"])]
        floats = [n.op_type for n in opt.graph.node if n.op_type in FLOAT_LAYER_OPS | {
            "ConvTranspose"} and n.name.startswith(layer["name"])]
        if layer["name"] in float_layers:
            check(floats and not kernels, f"{name}: {layer['name']} runs as {kernels}")
        else:
            check(len(kernels) == 1 and not floats,
                  f"{name}: layer {layer['name']} runs as {kernels + floats}: {ops}")
    left = [o for o in ops if o in FLOAT_LAYER_OPS]
    check(len(left) == len(float_layers), f"{name}: float layer ops {left}: {ops}")
    kernels = sorted({o for o in ops if o in INT8_OPS})
    print(f"{name}: {len(net.layers) - len(float_layers)} of {len(net.layers)} layers in int8 "
          f"kernels ({', '.join(kernels)}){', ' + ', '.join(float_layers) + ' in float' if float_layers else ''}; "
          f"output {db:.1f} dB from the exact form")
    return p.stderr


def main():
    ptq = sys.argv[1]
    ort = Ort()
    stderr = check_net(ptq, ort, "2-D net", net_2d(), config=CONFIG + DMQ_2D)
    check("layer 'pw': its 8 DMQ factors stay a Div before the layer" in stderr and
          "[W1255]" in stderr, f"pw's DMQ: no W1255 for the Clip before it:\n{stderr}")
    check("layer 'fc1'" not in stderr, f"fc1's DMQ was not folded into c3:\n{stderr}")
    check_net(ptq, ort, "Conv1d net", net_1d())
    check_net(ptq, ort, "Conv3d net", net_3d())
    check_net(ptq, ort, "ConvTranspose2d net", net_transpose(), float_layers=("up",))


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except Exception as e:  # a crash is a failure with its reason, never a skip
        import traceback
        traceback.print_exc()
        fail(f"{type(e).__name__}: {e}")
