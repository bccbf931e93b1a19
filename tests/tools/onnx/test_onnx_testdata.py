#!/usr/bin/env python3
"""onnx_testdata: ONNX's own QuantizeLinear/DequantizeLinear vectors (libonnx-testdata, opset 13,
uint8) against (a) ptq's quantizer and fake-quant dequantization (the qdq_codes helper, with
the int8 mapping zp - 128 of the uint8 zero point) and (b) the NumPy evaluator the other onnx
tests use.
    test_onnx_testdata.py QDQ_CODES TESTDATA_NODE_DIR
"""
import glob
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper

from onnx_common import check, fail, onnx_eval, read_npy, run, tmpdir, write_npy


def load_case(d):
    m = onnx.load(os.path.join(d, "model.onnx"))
    node = m.graph.node[0]
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1)

    def tensors(prefix):
        out = []
        for p in sorted(glob.glob(os.path.join(d, "test_data_set_0", prefix + "_*.pb"))):
            t = onnx.TensorProto()
            with open(p, "rb") as f:
                t.ParseFromString(f.read())
            out.append(onnx.numpy_helper.to_array(t))
        return out

    return node.op_type, axis, tensors("input"), tensors("output")[0]


def per_channel(v, x, axis):
    """[(index tuple, scale, zp)] per slice along axis (one slice for a scalar)."""
    v = np.asarray(v)
    if v.ndim == 0:
        return [((slice(None),) * x.ndim, v)]
    return [(tuple(slice(None) if k != axis % x.ndim else c for k in range(x.ndim)), v[c])
            for c in range(v.size)]


def main():
    helper, node_dir = sys.argv[1], sys.argv[2]
    work = tmpdir()
    names = ["test_quantizelinear", "test_quantizelinear_axis", "test_dequantizelinear",
             "test_dequantizelinear_axis"]
    for name in names:
        d = os.path.join(node_dir, name)
        check(os.path.isdir(d), f"{d} is missing (libonnx-testdata)")
        op, axis, ins, want = load_case(d)
        x, scale, zp = ins[0], ins[1], ins[2]
        check(zp.dtype == np.uint8, f"{name}: expected the uint8 vectors of opset 13")
        # (b) the evaluator
        got = (onnx_eval.quantize_linear(x, scale, zp, axis) if op == "QuantizeLinear"
               else onnx_eval.dequantize_linear(x, scale, zp, axis))
        check(got.dtype == want.dtype and np.array_equal(got, want),
              f"{name}: onnx_eval gives {got.ravel()}, ONNX {want.ravel()}")
        # (a) ptq, slice by slice along the axis
        ptq_out = np.zeros(want.shape, np.float64)
        for (idx, s), (_, z) in zip(per_channel(scale, x, axis), per_channel(zp, x, axis)):
            src = os.path.join(work, "in.npy")
            dst = os.path.join(work, "out.npy")
            offset = int(z) - 128
            if op == "QuantizeLinear":
                write_npy(src, x[idx])
                run([helper, "quantize", src, dst, repr(float(s)), str(offset), "-128", "127"])
                ptq_out[idx] = read_npy(dst).astype(np.float64) + 128
            else:
                write_npy(src, x[idx].astype(np.float32) - 128)  # ptq's int8 code
                run([helper, "dequantize", src, dst, repr(float(s)), str(offset)])
                ptq_out[idx] = read_npy(dst)
        check(np.array_equal(ptq_out, want.astype(np.float64)),
              f"{name}: ptq gives {ptq_out.ravel()}, ONNX {want.ravel()}")
        print(f"{name}: {want.size} values equal (ONNX, ptq, onnx_eval)")
    # The case that shows ties to even: 3 / 2 = 1.5 -> 2.
    _, _, ins, want = load_case(os.path.join(node_dir, "test_quantizelinear"))
    check(list(want) == [128, 129, 130, 255, 1, 0], f"test_quantizelinear vector is {want}")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # a crash is a failure with its reason, never a skip
        fail(f"{type(e).__name__}: {e}")
