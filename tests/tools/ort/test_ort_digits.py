#!/usr/bin/env python3
"""ort_digits: the bundled digits model's exports in ONNX Runtime (CPU), for quant.cfg,
quant_hfmg.cfg and dmq_balancer.cfg.
    test_ort_digits.py PTQ EXAMPLES_DIR

- the float model: ptq calibrate's FP32 accuracy and each test image's FP32 class;
- the QDQ model (`ptq calibrate --onnx ... --export onnx-qdq`, the engine-fusable default):
  byte-identical to `ptq export --format onnx-qdq` of the same record; ptq's quantized accuracy
  and each image's class as ptq's fake-quant model gives it; ONNX Runtime's optimized graph
  (optimizedModelFilePath) runs every quantized layer as an int8 kernel and holds no float
  Conv or Gemm;
- the calibrated graph (`--export onnx`) with the qdq-json table keyed by it, applied as an
  engine's converter would (qdq_apply.py): the same classes;
- the activation codes of the int8 kernels against ptq's exact form (--placement inputs --dmq
  exact) on the test images, per layer: printed (docs/deploy.md quotes them), also for the fused
  placement with --dmq exact, and the accuracy with --weight-type int8 (uint8 x int8 kernels,
  which saturate on x86 CPUs without VNNI): printed, as it depends on the CPU.
"""
import json
import os
import re
import sys

import numpy as np
import onnx
import onnx.helper as oh

from ort_common import FLOAT_LAYER_OPS, INT8_OPS, Ort, check, fail, read_safetensors, run, \
    tmpdir
from qdq_apply import apply_table


def layer_nodes(export_stdout):
    """layer -> node, from the lines `ptq export` prints."""
    return dict(re.findall(r"^(\S+): node (\S+),", export_stdout, re.M))


def with_outputs(model, names, elem_type):
    for n in names:
        model.graph.output.append(oh.make_tensor_value_info(n, elem_type, None))
    return model


def code_agreement(ort, work, exact_path, optimized_path, nodes, images):
    """Per layer: how many activation codes of the int8 kernels differ from the exact model's
    (ptq's quantizer on each layer's float input)."""
    exact = onnx.load(exact_path)
    refs = {layer: f"{layer}_input_quantized" for layer in nodes}
    path = os.path.join(work, "exact_outputs.onnx")
    onnx.save(with_outputs(exact, refs.values(), onnx.TensorProto.INT8), path)
    ref_out, _ = ort.run(path, images, level="disabled")
    opt = onnx.load(optimized_path)
    producer = {o: n for n in opt.graph.node for o in n.output}
    got = {}
    for layer, node in nodes.items():
        kernel = next((n for n in opt.graph.node if n.op_type in INT8_OPS and
                       n.name.startswith(node)), None)
        if kernel is None:
            fail(f"layer {layer}: no int8 kernel named after {node}")
        x = kernel.input[0]
        if x in producer and producer[x].op_type == "Transpose":  # NCHW -> NHWC
            x = producer[x].input[0]
        got[layer] = x
    path = os.path.join(work, "fused_outputs.onnx")
    onnx.save(with_outputs(opt, got.values(), onnx.TensorProto.UINT8), path)
    fused_out, _ = ort.run(path, images, level="disabled")
    report = {}
    for layer in nodes:
        ref = ref_out[refs[layer]].astype(np.int32)
        f = fused_out[got[layer]].astype(np.int32) - 128
        if f.shape != ref.shape and f.ndim == 4:
            f = f.transpose(0, 3, 1, 2)
        check(f.shape == ref.shape, f"{layer}: codes of shape {f.shape}, expected {ref.shape}")
        report[layer] = (int((f != ref).sum()), ref.size, int(np.abs(f - ref).max()))
    return report


def check_config(ptq, ort, examples, cfg, fp32_checked):
    work = tmpdir()
    digits = os.path.join(examples, "digits")
    model = os.path.join(digits, "model.onnx")
    name = os.path.basename(cfg)
    record, qdq, calibrated, table = (os.path.join(work, f) for f in
                                      ("record.txt", "qdq.onnx", "calibrated.onnx", "t.json"))
    p = run([ptq, "calibrate", cfg, "--record", record, "--json", "--quiet", "--onnx", model,
             "--export", "onnx-qdq=" + qdq, "--export", "onnx=" + calibrated,
             "--export", "qdq-json=" + table])
    summary = json.loads(p.stdout)
    test = read_safetensors(os.path.join(digits, "test.safetensors"))
    images, labels = test["images"], test["labels"].astype(np.int64)
    ptq_pred = np.asarray(summary["quantized_predictions"])
    check(abs((ptq_pred == labels).mean() - summary["quantized_accuracy"]) < 1e-12,
          f"{name}: the predictions do not give the quantized accuracy")

    if not fp32_checked:
        out, _ = ort.run(model, images)
        pred = out["logits"].argmax(1)
        want = np.asarray(summary["fp32_predictions"])
        check(np.array_equal(pred, want),
              f"the float model: {int((pred != want).sum())} classes differ from ptq's FP32")
        check(abs((pred == labels).mean() - summary["fp32_accuracy"]) < 1e-12, "FP32 accuracy")
        print(f"float model: {(pred == labels).mean():.4f} = ptq's FP32, image for image")

    again = os.path.join(work, "again.onnx")
    e = run([ptq, "export", "--format", "onnx-qdq", "--onnx", model, "--record", record,
             "--model", os.path.join(digits, "manifest.json"), "--config", cfg, "-o", again])
    nodes = layer_nodes(e.stdout)
    check(set(nodes) == {ln.split('"')[1] for ln in open(record) if ln.strip().startswith("key")},
          f"{name}: the export's layers {sorted(nodes)} differ from the record's")
    with open(qdq, "rb") as f, open(again, "rb") as g:
        check(f.read() == g.read(), f"{name}: ptq calibrate --export onnx-qdq and ptq export "
                                    "--format onnx-qdq wrote different models")

    optimized = os.path.join(work, "optimized.onnx")
    out, _ = ort.run(qdq, images, optimized=optimized)
    pred = out["logits"].argmax(1)
    check(np.array_equal(pred, ptq_pred),
          f"{name}: {int((pred != ptq_pred).sum())} of {len(pred)} classes differ from ptq's "
          "fake-quant model")
    opt = onnx.load(optimized)
    ops = [n.op_type for n in opt.graph.node]
    left = sorted(set(ops) & FLOAT_LAYER_OPS)
    check(not left, f"{name}: the optimized graph still runs {left} in float: {ops}")
    for layer, node in nodes.items():
        kernels = [n.op_type for n in opt.graph.node if n.op_type in INT8_OPS and
                   n.name.startswith(node)]
        check(len(kernels) == 1, f"{name}: layer {layer} ({node}) runs as {kernels}: {ops}")

    applied = os.path.join(work, "applied.onnx")
    onnx.save(apply_table(onnx.load(calibrated), table), applied)
    out, _ = ort.run(applied, images)
    tpred = out["logits"].argmax(1)
    check(np.array_equal(tpred, ptq_pred),
          f"{name}: the calibrated graph with its table: {int((tpred != ptq_pred).sum())} "
          "classes differ from ptq's")

    exact = os.path.join(work, "exact.onnx")
    run([ptq, "export", "--format", "onnx-qdq", "--onnx", model, "--record", record, "--model",
         os.path.join(digits, "manifest.json"), "--config", cfg, "--placement", "inputs",
         "--dmq", "exact", "--activations", "int8", "-o", exact])
    agreement = code_agreement(ort, work, exact, optimized, nodes, images)
    codes = ", ".join(f"{layer} {d}/{n} (max {m})" for layer, (d, n, m) in agreement.items())
    variants = []
    for flags in (["--dmq", "exact"], ["--weight-type", "int8"]):
        path = os.path.join(work, "variant.onnx")
        run([ptq, "export", "--format", "onnx-qdq", "--onnx", model, "--record", record,
             "--model", os.path.join(digits, "manifest.json"), "--config", cfg, "-o", path] +
            flags)
        vopt = os.path.join(work, "variant.optimized.onnx")
        out, _ = ort.run(path, images, optimized=vopt)
        vpred = out["logits"].argmax(1)
        v = code_agreement(ort, work, exact, vopt, nodes, images)
        variants.append(f"{' '.join(flags)}: {(vpred == labels).mean():.4f}, "
                        f"{int((vpred != ptq_pred).sum())} classes differ, codes " +
                        ", ".join(f"{layer} {d}/{n} (max {m})" for layer, (d, n, m) in v.items()))
    print(f"{name}: ONNX Runtime {(pred == labels).mean():.4f} = ptq {summary['quantized_accuracy']:.4f}, "
          f"image for image; int8 kernels {', '.join(sorted(set(ops) & INT8_OPS))}; the "
          f"calibrated graph with its table: the same classes; codes differing from the exact "
          f"form: {codes}; " + "; ".join(variants))


def main():
    ptq, examples = sys.argv[1:3]
    ort = Ort()
    configs = os.path.join(examples, "configs")
    for i, cfg in enumerate(("quant.cfg", "quant_hfmg.cfg", "dmq_balancer.cfg")):
        check_config(ptq, ort, examples, os.path.join(configs, cfg), i > 0)


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except Exception as e:  # a crash is a failure with its reason, never a skip
        import traceback
        traceback.print_exc()
        fail(f"{type(e).__name__}: {e}")
