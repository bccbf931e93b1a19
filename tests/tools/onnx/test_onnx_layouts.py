#!/usr/bin/env python3
"""onnx_layouts: the weight layouts (docs/export.md, the QDQ table's `axis`) on a hand-made
model and record, checked against codes derived here by hand: a grouped Conv (axis 0, DMQ,
asymmetric offset_d -37), a ConvTranspose (axis 1), a MatMul with a K×N weight (axis 1, DMQ
along K) and a Gemm with transB=0 and a per-tensor INT4 weight (no axis). python3-onnx's
checker must accept the result.
    test_onnx_layouts.py PTQ
"""
import json
import os
import sys

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as nh

from onnx_common import check, check_model, fail, run, tmpdir


def f32(a):
    return np.asarray(a, np.float32)


def main():
    ptq = sys.argv[1]
    work = tmpdir()
    os.chdir(work)
    rng = np.random.default_rng(13)
    w = {
        "c.weight": f32(rng.normal(size=(6, 2, 3, 3))), "c.bias": f32(rng.normal(size=6)),
        "t.weight": f32(rng.normal(size=(6, 3, 2, 2))),
        "m.weight": f32(rng.normal(size=(300, 8))),  # MatMul B: K x N
        "g.weight": f32(rng.normal(size=(8, 5))), "g.bias": f32(rng.normal(size=5)),
    }
    nodes = [
        oh.make_node("Conv", ["x", "c.weight", "c.bias"], ["c_out"], name="/c/Conv", group=2,
                     pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        oh.make_node("Relu", ["c_out"], ["r_out"], name="/r/Relu"),
        oh.make_node("ConvTranspose", ["r_out", "t.weight"], ["t_out"], name="/t/ConvTranspose",
                     strides=[2, 2], kernel_shape=[2, 2]),
        oh.make_node("Flatten", ["t_out"], ["f_out"], name="/Flatten", axis=1),
        oh.make_node("MatMul", ["f_out", "m.weight"], ["m_out"], name="/m/MatMul"),
        oh.make_node("Gemm", ["m_out", "g.weight", "g.bias"], ["y"], name="/g/Gemm", transB=0),
    ]
    graph = oh.make_graph(nodes, "layouts",
                          [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 4, 5, 5])],
                          [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 5])],
                          [nh.from_array(v, k) for k, v in w.items()])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)], ir_version=7)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, "model.onnx")
    manifest = {"layers": [
        {"name": "c", "type": "Conv2d", "weight": "c.weight", "bias": "c.bias", "groups": 2,
         "padding": [1, 1], "activation": "ReLU"},
        {"name": "t", "type": "ConvTranspose2d", "weight": "t.weight", "stride": [2, 2]},
        {"name": "m", "type": "Linear", "weight": "m.weight", "flatten": True},
        {"name": "g", "type": "Linear", "weight": "g.weight", "bias": "g.bias"},
    ]}
    with open("manifest.json", "w") as f:
        json.dump(manifest, f)
    sc = f32(rng.uniform(0.01, 0.03, 6))
    st = f32(rng.uniform(0.01, 0.03, 3))
    sm = f32(rng.uniform(0.01, 0.03, 8))
    sg = f32([0.4])
    bc = f32(rng.uniform(0.5, 2.0, 4))
    bm = f32(rng.uniform(0.5, 2.0, 300))

    def entry(key, scale_d, offset_d, scale_w, wts="INT8", balance=()):
        lines = [f'record {{\n  key: "{key}"\n  value {{\n    scale_d: {scale_d!r}\n'
                 f'    offset_d: {offset_d}\n']
        lines += [f"    scale_w: {float(s)!r}\n" for s in scale_w]
        lines += ["    offset_w: 0\n" for _ in scale_w]
        lines += [f"    tensor_balance_factor: {float(b)!r}\n" for b in balance]
        lines.append(f'    act_type: "INT8"\n    wts_type: "{wts}"\n  }}\n}}\n')
        return "".join(lines)

    with open("record.txt", "w") as f:
        f.write(entry("c", 0.02, -37, sc, balance=bc) + entry("t", 0.05, 5, st) +
                entry("m", 0.1, 0, sm, balance=bm) + entry("g", 0.25, 3, sg, wts="INT4"))
    exact = [ptq, "export", "--format", "onnx-qdq", "--onnx", "model.onnx", "--record",
             "record.txt", "--model", "manifest.json", "--placement", "inputs", "--dmq", "exact"]
    run(exact + ["-o", "qdq.onnx", "--activations", "int8", "--weight-type", "int8"])
    run(exact + ["-o", "qdq_u8.onnx"])  # onnxruntime's default: uint8 8-bit weights
    m = check_model("qdq.onnx")
    m8 = check_model("qdq_u8.onnx")
    inits8 = {t.name: nh.to_array(t) for t in m8.graph.initializer}
    inits = {t.name: nh.to_array(t) for t in m.graph.initializer}
    dqs = {n.input[0]: n for n in m.graph.node if n.op_type == "DequantizeLinear"}

    def expect(name, want_codes, scales, axis):
        n = dqs.get(name + "_quantized")
        check(n is not None, f"{name}: no weight DequantizeLinear")
        got_axis = next((a.i for a in n.attribute if a.name == "axis"), None)
        check(got_axis == axis, f"{name}: axis {got_axis}, expected {axis}")
        check(np.array_equal(inits[n.input[1]], scales), f"{name}: scales differ")
        codes = inits[n.input[0]]
        check(codes.dtype == np.int8 and codes.shape == want_codes.shape,
              f"{name}: codes {codes.dtype}{codes.shape}, expected int8{want_codes.shape}")
        check(np.array_equal(codes, want_codes),
              f"{name}: {int((codes != want_codes).sum())} codes differ from the hand-derived")
        check(name not in inits, f"{name}: the float initializer is still in the model")
        c8, z8 = inits8[n.input[0]], inits8[n.input[2]]
        if c8.dtype == np.uint8:  # 8 bits: the same grid shifted by 128
            check(np.all(z8 == 128) and np.array_equal(c8.astype(np.int32) - 128, codes),
                  f"{name}: uint8 codes are not the int8 codes + 128")
        else:  # fewer bits stay int8
            check(c8.dtype == np.int8 and np.array_equal(c8, codes), f"{name}: codes differ")

    def codes(x, s, lo=-128, hi=127):
        return np.clip(np.rint(f32(x) / s), lo, hi).astype(np.int8)

    # Conv, group 2: W[o, ci, k, k] * b[g(o) * 2 + ci], scale per o along axis 0.
    wc = w["c.weight"].copy()
    for o in range(6):
        for ci in range(2):
            wc[o, ci] *= bc[(o // 3) * 2 + ci]
    expect("c.weight", codes(wc, sc.reshape(6, 1, 1, 1)), sc, 0)
    # ConvTranspose: W[Cin, Cout, k, k], Cout on axis 1.
    expect("t.weight", codes(w["t.weight"], st.reshape(1, 3, 1, 1)), st, 1)
    # MatMul B[K, N]: the DMQ factors along K (rows), scales along N (axis 1).
    wm = (w["m.weight"] * bm.reshape(300, 1)).astype(np.float32)
    expect("m.weight", codes(wm, sm.reshape(1, 8)), sm, 1)
    # Gemm transB=0, per tensor INT4: one scalar scale, codes in [-8, 7], no axis.
    expect("g.weight", codes(w["g.weight"], sg[0], -8, 7), sg[0], None)
    check(int(inits["c_input_zero_point"]) == -37, "c: zero point is not offset_d")
    div = next(n for n in m.graph.node if n.op_type == "Div" and n.input[0] == "x")
    check(list(inits[div.input[1]].shape) == [4, 1, 1], "c: DMQ factors not shaped [C,1,1]")
    div = next(n for n in m.graph.node if n.op_type == "Div" and n.input[0] == "f_out")
    check(list(inits[div.input[1]].shape) == [300], "m: DMQ factors not shaped [K]")
    print("onnx_layouts: Conv(group 2) axis 0, ConvTranspose axis 1, MatMul axis 1, "
          "Gemm transB=0 per tensor INT4: codes as derived by hand")


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except Exception as e:
        import traceback
        traceback.print_exc()
        fail(f"{type(e).__name__}: {e}")
