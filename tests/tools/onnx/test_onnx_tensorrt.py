#!/usr/bin/env python3
"""onnx_tensorrt: `ptq export --format onnx-qdq --engine tensorrt` keeps TensorRT's explicit
quantization rules (docs/deploy.md, TensorRT; TensorRT itself is not in Debian), on the bundled
model:
    test_onnx_tensorrt.py PTQ EXAMPLES_DIR

- every QuantizeLinear/DequantizeLinear is int8 with zero points 0 and finite positive scales;
  only weights are per axis, with as many scales as dims[axis]; no int32 or uint8 tensor;
- Q/DQ sit on the quantized layers' inputs and weights only;
- quant_hfmg.cfg (symmetric): ptq's quantized accuracy in the NumPy evaluator; quant.cfg's
  asymmetric fc is written on the symmetric grid with W1220, and --strict refuses it (E1220).
"""
import json
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper as nh

from onnx_common import check, check_model, fail, onnx_eval, read_safetensors, run, tmpdir


def check_rules(m, layers):
    inits = {t.name: nh.to_array(t) for t in m.graph.initializer}
    producers = {o: n for n in m.graph.node for o in n.output}
    qs = [n for n in m.graph.node if n.op_type == "QuantizeLinear"]
    dqs = [n for n in m.graph.node if n.op_type == "DequantizeLinear"]
    for n in qs + dqs:
        scale, zp = inits[n.input[1]], inits[n.input[2]]
        check(zp.dtype == np.int8 and not zp.any(), f"{n.name}: zero point {zp} is not int8 0")
        check(np.all(np.isfinite(scale)) and np.all(scale > 0), f"{n.name}: scale {scale}")
        axis = [a.i for a in n.attribute if a.name == "axis"]
        weight = n.op_type == "DequantizeLinear" and n.input[0] in inits
        if scale.ndim:
            check(weight, f"{n.name}: an activation quantized per axis")
            dims = inits[n.input[0]].shape
            check(len(scale) == dims[axis[0] if axis else 1],
                  f"{n.name}: {len(scale)} scales for dims {dims}")
        if weight:
            check(inits[n.input[0]].dtype == np.int8, f"{n.name}: weights not int8")
    check(len(qs) == layers, f"{len(qs)} QuantizeLinear for {layers} layers")
    for q in qs:  # each activation Q feeds one DQ that feeds a layer
        check(q.name.endswith("_input_QuantizeLinear"), f"{q.name}: not a layer input")


def main():
    ptq, examples = sys.argv[1:3]
    work = tmpdir()
    digits = os.path.join(examples, "digits")
    test = read_safetensors(os.path.join(digits, "test.safetensors"))
    for cfg_name in ("quant_hfmg.cfg", "quant.cfg"):
        cfg = os.path.join(examples, "configs", cfg_name)
        record = os.path.join(work, "record.txt")
        summary = json.loads(run([ptq, "calibrate", cfg, "--record", record, "--json",
                                  "--quiet"]).stdout)
        out = os.path.join(work, "trt.onnx")
        base = [ptq, "export", "--format", "onnx-qdq", "--engine", "tensorrt", "--onnx",
                os.path.join(digits, "model.onnx"), "--record", record, "--model",
                os.path.join(digits, "manifest.json"), "--config", cfg, "-o", out]
        p = run(base)
        m = check_model(out)
        layers = sum(1 for ln in open(record) if ln.startswith("record {"))
        check_rules(m, layers)
        env = onnx_eval.run(m, {"images": test["images"]})
        acc = float((env["logits"].argmax(1) == test["labels"].astype(np.int64)).mean())
        if cfg_name == "quant_hfmg.cfg":
            check("[W1220]" not in p.stderr, f"{cfg_name}: symmetric, yet {p.stderr}")
            check(abs(acc - summary["quantized_accuracy"]) < 1e-9,
                  f"{cfg_name}: {acc} in the evaluator, ptq {summary['quantized_accuracy']}")
        else:
            check("layer 'fc': onnx-qdq for TensorRT: asymmetric activation (offset_d -128)" in
                  p.stderr and "[W1220]" in p.stderr, f"{cfg_name}: no W1220 for fc: {p.stderr}")
            os.remove(out)
            s = run(base + ["--strict"], expect_rc=1)
            check("[E1220]" in s.stderr and not os.path.exists(out), f"--strict: {s.stderr}")
        print(f"{cfg_name}: TensorRT's rules hold; evaluator {acc:.4f} (ptq "
              f"{summary['quantized_accuracy']:.4f})")


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except Exception as e:
        import traceback
        traceback.print_exc()
        fail(f"{type(e).__name__}: {e}")
