#!/usr/bin/env python3
"""onnx_errors: wrong inputs of `ptq export --format onnx-qdq`, each with its exact message and
exit code 1, and no output file left behind.
    test_onnx_errors.py PTQ EXAMPLES_DIR
"""
import json
import os
import shutil
import sys

import onnx

from onnx_common import check, fail, run, tmpdir


def main():
    ptq, examples = sys.argv[1:3]
    digits = os.path.join(examples, "digits")
    cfg = os.path.join(examples, "configs", "quant.cfg")
    work = tmpdir()
    os.chdir(work)
    shutil.copy(os.path.join(digits, "model.onnx"), "model.onnx")
    shutil.copy(os.path.join(digits, "manifest.json"), "manifest.json")
    shutil.copy(cfg, "quant.cfg")
    run([ptq, "calibrate", "quant.cfg", "--record", "record.txt", "--quiet"])

    def export(onnx_path="model.onnx", record="record.txt", model="manifest.json",
               config="quant.cfg", out="out.onnx", extra=()):
        cmd = [ptq, "export", "--format", "onnx-qdq", "--onnx", onnx_path, "--record", record,
               "--model", model, "-o", out] + list(extra)
        if config:
            cmd += ["--config", config]
        return cmd

    def expect(cmd, message):
        p = run(cmd, expect_rc=1)
        check(p.stderr == message, f"{' '.join(cmd[1:])}:\n got {p.stderr!r}\nwant {message!r}")
        check(not os.path.exists("out.onnx"), "an output was written on error")
        check(not [f for f in os.listdir(".") if ".tmp." in f], "a temporary file was left")

    with open("notes.txt", "w") as f:
        f.write("these are not the weights you are looking for\n")
    expect(export(onnx_path="notes.txt"),
           "ptq export: error: --onnx 'notes.txt': not an ONNX model (it does not parse as an "
           "ONNX ModelProto; a truncated or foreign file) [E1251]\n")

    with open(os.path.join(digits, "model.onnx"), "rb") as f:
        data = f.read()
    with open("truncated.onnx", "wb") as f:
        f.write(data[:len(data) // 2])
    expect(export(onnx_path="truncated.onnx"),
           "ptq export: error: --onnx 'truncated.onnx': not an ONNX model (it does not parse as "
           "an ONNX ModelProto; a truncated or foreign file) [E1251]\n")

    open("empty.onnx", "wb").close()
    expect(export(onnx_path="empty.onnx"),
           "ptq export: error: --onnx 'empty.onnx': not an ONNX model (no ir_version or an "
           "empty graph) [E1251]\n")

    os.mkdir("folder.onnx")
    expect(export(onnx_path="folder.onnx"),
           "ptq export: error: --onnx: 'folder.onnx' is a directory; a regular file is needed "
           "[E1002]\n")

    # A manifest whose weight name is not in the model (as after torch's constant folding).
    with open("manifest.json") as f:
        manifest = json.load(f)
    manifest["layers"][1]["weight"] = "features.3.weight"
    with open("renamed.json", "w") as f:
        json.dump(manifest, f)
    expect(export(model="renamed.json"),
           "ptq export: error: layer 'conv2': its weight 'features.3.weight' (--model) is not an "
           "initializer of 'model.onnx' [E1252]\n"
           "note: weights of the model: 'conv1.weight' (/conv1/Conv), 'conv2.weight' "
           "(/conv2/Conv), 'fc.weight' (/fc/Gemm)\n")

    # The model as a plain torch.onnx.export writes it: a folded weight gets an 'onnx::' name,
    # and the note says which export flags keep the state_dict names.
    m = onnx.load("model.onnx")
    for t in m.graph.initializer:
        if t.name == "conv2.weight":
            t.name = "onnx::Conv_29"
    for n in m.graph.node:
        for i, name in enumerate(n.input):
            if name == "conv2.weight":
                n.input[i] = "onnx::Conv_29"
    onnx.save(m, "folded.onnx")
    expect(export(onnx_path="folded.onnx"),
           "ptq export: error: layer 'conv2': its weight 'conv2.weight' (--model) is not an "
           "initializer of 'folded.onnx' [E1252]\n"
           "note: weights of the model: 'conv1.weight' (/conv1/Conv), 'onnx::Conv_29' "
           "(/conv2/Conv), 'fc.weight' (/fc/Gemm); an 'onnx::' name is a weight "
           "torch.onnx.export folded a BatchNorm into: export with do_constant_folding=False "
           "and training=torch.onnx.TrainingMode.PRESERVE (docs/deploy.md, From PyTorch)\n")

    # A weight read through an Identity (torch shares equal initializers so) is the layer's
    # weight: the export quantizes it and drops the Identity with the float weight.
    m = onnx.load("model.onnx")
    for n in m.graph.node:
        if n.op_type == "Gemm":
            ident = onnx.helper.make_node("Identity", ["fc.weight"], ["fc_weight_copy"],
                                          name="/fc/Identity")
            n.input[1] = "fc_weight_copy"
    nodes = list(m.graph.node)
    gemm = next(i for i, n in enumerate(nodes) if n.op_type == "Gemm")
    nodes.insert(gemm, ident)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    onnx.save(m, "indirect.onnx")
    run(export(onnx_path="indirect.onnx"))
    q = onnx.load("out.onnx")
    check(not [n for n in q.graph.node if n.op_type == "Identity"], "the Identity stayed")
    check("fc.weight" not in {t.name for t in q.graph.initializer}, "the float weight stayed")
    os.remove("out.onnx")

    # A weight that reaches its node through another op is not the layer's weight.
    m = onnx.load("model.onnx")
    for n in m.graph.node:
        if n.op_type == "Gemm":
            tr = onnx.helper.make_node("Transpose", ["fc.weight"], ["fc_weight_t"],
                                       name="/fc/Transpose", perm=[1, 0])
            n.input[1] = "fc_weight_t"
            for a in n.attribute:
                if a.name == "transB":
                    a.i = 0
    nodes = list(m.graph.node)
    gemm = next(i for i, n in enumerate(nodes) if n.op_type == "Gemm")
    nodes.insert(gemm, tr)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    onnx.save(m, "transposed.onnx")
    expect(export(onnx_path="transposed.onnx"),
           "ptq export: error: layer 'fc': no Conv, ConvTranspose, Gemm or MatMul node of "
           "'transposed.onnx' reads the weight 'fc.weight' [E1252]\n"
           "note: weights of the model: 'conv1.weight' (/conv1/Conv), 'conv2.weight' "
           "(/conv2/Conv), 'fc_weight_t' (/fc/Gemm)\n")

    expect(export(config=None),
           "ptq export: error: layer 'conv1', 'conv2' has a BatchNorm; whether calibration "
           "folded it into the weights is the config's choice (do_fusion, skip_fusion_layers) "
           "[E1254]\nnote: pass the calibration's config with --config\n")

    shutil.copy(os.path.join(examples, "configs", "digits_ada.cfg"), "ada.cfg")
    expect(export(config="ada.cfg"),
           "ptq export: error: --config 'ada.cfg': layer 'conv1' is quantized by AdaRound "
           "(ada_quantize), whose learned rounding the record does not hold; ptq export would "
           "round its weights to nearest [E1253]\nnote: export from ptq calibrate ... --onnx "
           "MODEL --export onnx-qdq=OUT, which has the learned weights\n")

    shutil.copy(os.path.join(examples, "configs", "quant_hfmg.cfg"), "hfmg.cfg")
    expect(export(config="hfmg.cfg"),
           "ptq export: error: --record 'record.txt' has no entry for layer 'pool', which "
           "--config 'hfmg.cfg' quantizes [E1209]\nnote: export the record of the calibration "
           "that ran with this config\n")
    open("empty.txt", "w").close()
    expect(export(record="empty.txt"),
           "ptq export: error: --record 'empty.txt' holds no layer [E1209]\nnote: export the "
           "record ptq calibrate --record wrote\n")

    m = onnx.load("model.onnx")
    m.opset_import[0].version = 11
    onnx.save(m, "opset11.onnx")
    expect(export(onnx_path="opset11.onnx"),
           "ptq export: error: --onnx 'opset11.onnx': the model imports opset 11 of the default "
           "domain; per-axis QuantizeLinear/DequantizeLinear need opset 13 or newer [E1253]\n"
           "note: export the float model with opset_version=13 or newer\n")

    with open("record.txt") as f:
        record = f.read()
    with open("extra.txt", "w") as f:
        f.write(record.replace('key: "fc"', 'key: "fc9"'))
    p = run(export(record="extra.txt"), expect_rc=1)
    check("[E" in p.stderr and "fc9" in p.stderr, f"record layer fc9: {p.stderr!r}")

    expect(export(out="model.onnx"),
           "ptq export: error: -o 'model.onnx' is the same file as --onnx 'model.onnx'; an "
           "output must not overwrite an input [E1101]\n")
    print("onnx_errors: every wrong input gives its message and exit code 1")


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except Exception as e:
        import traceback
        traceback.print_exc()
        fail(f"{type(e).__name__}: {e}")
