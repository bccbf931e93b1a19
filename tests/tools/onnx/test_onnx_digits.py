#!/usr/bin/env python3
"""onnx_digits: `ptq export --format onnx-qdq` on the bundled digits model, end to end.
    test_onnx_digits.py PTQ QDQ_CODES EXAMPLES_DIR

For each config: ptq calibrate (record, fake-quantized weights, its quantized accuracy), then
the exact export (--placement inputs --dmq exact: Q/DQ on the layers' inputs and weights only,
the DMQ Div, BatchNorms as calibrated; the engine-fusable default is checked in a real engine
by the ort_* tests), then
- python3-onnx's checker (full_check) and strict shape inference accept the model;
- the NumPy evaluator's test accuracy equals ptq calibrate's, image for image in count;
- every weight's int8 codes, dequantized (and divided back by the DMQ factors), are ptq's
  fake-quantized weights bit for bit, and a folded conv's bias is ptq's fused bias;
- every activation QuantizeLinear output equals ptq's quantizer on the same input, and every
  activation DequantizeLinear output equals ptq's fake-quant kernel, bit for bit;
- uint8 activations (--uint8-activations) give the same dequantized values and logits.
"""
import json
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper

from onnx_common import (check, check_model, fail, onnx_eval, read_npy, read_safetensors, run,
                         tmpdir, write_npy)


def ptq_codes(helper, work, mode, x, scale, offset, qmin=-128, qmax=127):
    src, dst = os.path.join(work, "x.npy"), os.path.join(work, "y.npy")
    write_npy(src, x)
    run([helper, mode, src, dst, repr(float(scale)), str(int(offset)), str(qmin), str(qmax)])
    return read_npy(dst)


def initializers(m):
    return {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}


def check_config(ptq, helper, examples, cfg, expect_accuracy=None):
    work = tmpdir()
    digits = os.path.join(examples, "digits")
    record = os.path.join(work, "record.txt")
    fqw = os.path.join(work, "fq.safetensors")
    p = run([ptq, "calibrate", cfg, "--record", record, "--fake-quant-weights", fqw,
             "--json", "--quiet"])
    summary = json.loads(p.stdout)
    acc = summary["quantized_accuracy"]
    if expect_accuracy is not None:
        check(abs(acc - expect_accuracy) < 5e-5,
              f"{cfg}: ptq calibrate's quantized accuracy is {acc}, expected {expect_accuracy}")
    out = os.path.join(work, "qdq.onnx")
    out_u8 = os.path.join(work, "qdq_u8.onnx")
    base = [ptq, "export", "--format", "onnx-qdq", "--onnx", os.path.join(digits, "model.onnx"),
            "--record", record, "--model", os.path.join(digits, "manifest.json"),
            "--config", cfg, "--placement", "inputs", "--dmq", "exact"]
    run(base + ["-o", out, "--activations", "int8", "--weight-type", "int8"])
    run(base + ["-o", out_u8, "--uint8-activations"])
    check(not [f for f in os.listdir(work) if ".tmp." in f], "a temporary file was left")
    m = check_model(out)
    m8 = check_model(out_u8)
    check(any(o.domain in ("", "ai.onnx") and o.version >= 13 for o in m.opset_import),
          "opset < 13")

    test = read_safetensors(os.path.join(digits, "test.safetensors"))
    images, labels = test["images"], test["labels"].astype(np.int64)
    env = onnx_eval.run(m, {"images": images})
    env8 = onnx_eval.run(m8, {"images": images})
    pred = env["logits"].argmax(1)
    correct = int((pred == labels).sum())
    check(correct == round(acc * len(labels)),
          f"{cfg}: the QDQ model gets {correct}/{len(labels)} right, ptq calibrate "
          f"{acc * len(labels):.1f}")
    check(np.array_equal(env["logits"], env8["logits"]),
          f"{cfg}: uint8 activations change the logits")

    inits = initializers(m)
    fq = read_safetensors(fqw)
    nodes = {n.name: n for n in m.graph.node}
    q_nodes = [n for n in m.graph.node if n.op_type == "QuantizeLinear"]
    layers_checked = []
    for qn in q_nodes:
        layer = qn.name[:-len("_input_QuantizeLinear")]
        scale = float(inits[qn.input[1]])
        zp = int(inits[qn.input[2]])
        check(inits[qn.input[2]].dtype == np.int8, f"{layer}: zero point is not int8")
        x = env[qn.input[0]]
        codes = ptq_codes(helper, work, "quantize", x, scale, zp)
        check(np.array_equal(codes, env[qn.output[0]].astype(np.float32)),
              f"{layer}: activation codes differ from ptq's quantizer "
              f"({int((codes != env[qn.output[0]]).sum())} of {codes.size})")
        dq = next(n for n in m.graph.node if n.op_type == "DequantizeLinear"
                  and n.input[0] == qn.output[0])
        fake = ptq_codes(helper, work, "fake", x, scale, zp)
        check(np.array_equal(fake, env[dq.output[0]]),
              f"{layer}: DequantizeLinear differs from ptq's fake-quant kernel")
        # uint8 form: the same grid shifted by 128.
        q8 = next(n for n in m8.graph.node if n.name == qn.name)
        zp8 = int(initializers(m8)[q8.input[2]])
        check(zp8 == zp + 128, f"{layer}: uint8 zero point {zp8}, expected {zp + 128}")
        check(np.array_equal(env8[q8.output[0]].astype(np.int32) - 128,
                             env[qn.output[0]].astype(np.int32)),
              f"{layer}: uint8 codes are not the int8 codes + 128")
        layers_checked.append(layer)

    # uint8 weights (the default --weight-type of onnxruntime for 8-bit weights): the same
    # grid, codes and zero point shifted by 128, so the dequantized weights are the same.
    inits8 = initializers(m8)
    for dq in [n for n in m8.graph.node if n.op_type == "DequantizeLinear"
               and n.input[0].endswith(".weight_quantized")]:
        c8, z8 = inits8[dq.input[0]], inits8[dq.input[2]]
        c = inits[dq.input[0]]
        if c8.dtype == np.uint8:
            check(np.all(z8 == 128), f"{dq.input[0]}: a uint8 weight zero point is not 128")
            check(np.array_equal(c8.astype(np.int32) - 128, c.astype(np.int32)),
                  f"{dq.input[0]}: uint8 codes are not the int8 codes + 128")
        else:
            check(c8.dtype == np.int8 and np.array_equal(c8, c), f"{dq.input[0]}: codes differ")
        check(np.array_equal(env8[dq.output[0]], env[dq.output[0]]),
              f"{dq.input[0]}: the uint8 weights dequantize differently")

    weights_checked = []
    for dq in [n for n in m.graph.node if n.op_type == "DequantizeLinear"
               and n.input[0].endswith(".weight_quantized")]:
        wname = dq.input[0][:-len("_quantized")]
        weights_checked.append(wname)
        layer = wname[:-len(".weight")]
        codes = inits[dq.input[0]]
        check(codes.dtype == np.int8, f"{wname}: codes are not int8")
        scale = inits[dq.input[1]]
        check(not inits[dq.input[2]].any(), f"{wname}: a weight zero point is not 0")
        w = env[dq.output[0]]
        consumer = next(n for n in m.graph.node if dq.output[0] in n.input)
        balance = inits.get(layer + "_dmq_factors")
        if balance is not None:  # ptq's file is the balanced weight times 1/b along Cin
            inv = (np.float32(1) / balance.reshape(-1)).astype(np.float32)
            shape = [1, -1] + [1] * (w.ndim - 2) if consumer.op_type == "Conv" else [1, -1]
            w = (w * inv.reshape(shape)).astype(np.float32)
        check(np.array_equal(w, fq[wname]),
              f"{wname}: dequantized codes differ from ptq's fake-quantized weight "
              f"(max |diff| {np.abs(w - fq[wname]).max()})")
        bias = consumer.input[2] if len(consumer.input) > 2 else None
        if bias is not None and layer + ".bias" in fq:
            check(np.array_equal(inits[bias], fq[layer + ".bias"]),
                  f"{layer}: the bias differs from ptq's (fused) bias")
    check(weights_checked == ["conv1.weight", "conv2.weight", "fc.weight"],
          f"{cfg}: weight DequantizeLinear nodes {weights_checked}")
    check(len(layers_checked) == len([ln for ln in open(record) if ln.startswith("record {")]),
          f"{cfg}: activation Q nodes {layers_checked} differ from the record's layers")
    fused = [n for n in m.graph.node if n.op_type == "BatchNormalization"]
    kept_bn = {n.input[1].split(".")[0] for n in fused}
    for name in ("bn1", "bn2"):
        check((name in kept_bn) == (name + ".weight" in fq),
              f"{name}: the BatchNormalization is kept/folded unlike ptq's calibration")
    print(f"{os.path.basename(cfg)}: {correct}/{len(labels)} = {correct / len(labels):.4f} "
          f"(ptq calibrate {acc:.4f}); activation codes of {', '.join(layers_checked)} and the "
          f"weights {', '.join(weights_checked)} equal to ptq's")


def check_onnx_names(ptq, examples):
    """--onnx with another format: entries keyed by the calibrated graph's tensor names (conv1's
    and fc's inputs through their DMQ Div, conv2's DMQ folded into bn1)."""
    work = tmpdir()
    digits = os.path.join(examples, "digits")
    cfg = os.path.join(examples, "configs", "quant.cfg")
    record = os.path.join(work, "record.txt")
    run([ptq, "calibrate", cfg, "--record", record, "--quiet"])
    out = os.path.join(work, "enc.json")
    run([ptq, "export", "--format", "aimet-1.0.0", "--record", record, "--model",
         os.path.join(digits, "manifest.json"), "--weights",
         os.path.join(digits, "model.safetensors"), "--config", cfg, "--onnx",
         os.path.join(digits, "model.onnx"), "-o", out])
    with open(out) as f:
        enc = json.load(f)
    acts = [e["name"] for e in enc["activation_encodings"]]
    params = [e["name"] for e in enc["param_encodings"]]
    check(acts == ["conv1_input_balanced", "/relu1/Relu_output_0", "fc_input_balanced"],
          f"--onnx activation names {acts}")
    check(params == ["conv1.weight", "conv2.weight", "fc.weight"], f"--onnx weight names {params}")
    common = ["--record", record, "--model", os.path.join(digits, "manifest.json"), "--weights",
              os.path.join(digits, "model.safetensors"), "--config", cfg, "--onnx",
              os.path.join(digits, "model.onnx")]
    table = os.path.join(work, "t.table")
    run([ptq, "export", "--format", "ncnn-table", "-o", table] + common)
    keys = [ln.split(" ")[0] for ln in open(table)]
    check(keys == ["/conv1/Conv_param_0", "/conv2/Conv_param_0", "/fc/Gemm_param_0",
                   "/conv1/Conv", "/conv2/Conv", "/fc/Gemm"], f"--onnx ncnn keys {keys}")
    cache = os.path.join(work, "t.cache")
    run([ptq, "export", "--format", "trt-cache", "--trt-version", "8601", "-o", cache] + common)
    keys = [ln.split(":")[0] for ln in open(cache)][1:]
    check(keys == acts, f"--onnx TensorRT cache keys {keys}")
    print("--onnx: aimet-1.0.0 and trt-cache key by the calibrated graph's tensor names " +
          ", ".join(acts + params) + "; ncnn-table by its node names")


def main():
    ptq, helper, examples = sys.argv[1:4]
    check_onnx_names(ptq, examples)
    configs = os.path.join(examples, "configs")
    check_config(ptq, helper, examples, os.path.join(configs, "quant.cfg"), 535 / 540)
    for cfg in ("dmq_balancer.cfg", "quant_hfmg.cfg"):
        check_config(ptq, helper, examples, os.path.join(configs, cfg))


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except Exception as e:  # a crash is a failure with its reason, never a skip
        import traceback
        traceback.print_exc()
        fail(f"{type(e).__name__}: {e}")
