#!/usr/bin/env python3
"""torch_recipe: the PyTorch recipe of docs/deploy.md (examples/pytorch/recipe.py) with Debian's
python3-torch, on the bundled digits network with bias-free convolutions:
    test_torch_recipe.py PTQ EXAMPLES_DIR DOCS_DIR

- the two-pass flow: ptq calibrate on the layer inputs of the float model, the fake-quantized
  weights loaded back (conv2's fused BatchNorm becomes an Identity and its fused bias a new
  bias), the inputs dumped again, calibrated again; each pass keeps the test accuracy within a
  point of FP32, where the old recipe (strict=False) drops that bias and loses points;
- the loader refuses a file without that bias rather than dropping it;
- export_onnx's model is what `ptq export --format onnx-qdq` reads (no E1252);
- the recipe's snippets in docs/deploy.md are the regions of recipe.py they quote.
"""
import os
import re
import sys
import tempfile

import numpy as np


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def main():
    ptq, examples, docs = sys.argv[1:4]
    try:
        import torch  # noqa: F401
    except ImportError as e:
        fail(f"python3-torch is not installed ({e}); tools/install-deps.sh --test installs it")
    sys.path.insert(0, os.path.join(examples, "pytorch"))
    import recipe
    import subprocess
    work = tempfile.mkdtemp(prefix="ptq-torch-test-")
    test = recipe.read_safetensors(os.path.join(examples, "digits", "test.safetensors"))
    images, labels = np.array(test["images"]), test["labels"].astype(np.int64)
    model = recipe.digits_without_bias(examples)
    fp32 = recipe.accuracy(model, images, labels)
    check(abs(fp32 - 536 / 540) < 1e-9, f"the bias-free digits network: FP32 {fp32}")
    manifest = recipe.manifest_of(model)
    import json
    with open(os.path.join(work, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    recipe.save_safetensors(os.path.join(work, "weights.safetensors"),
                            {k: v.numpy() for k, v in model.state_dict().items()
                             if v.is_floating_point()})
    calib = recipe.read_safetensors(os.path.join(examples, "digits", "calib.safetensors"))
    import torch
    batches = [torch.from_numpy(np.array(calib["images"][i:i + 32])) for i in (0, 32)]
    cfg = os.path.join(examples, "configs", "quant.cfg")
    for step in (1, 2):
        paths = recipe.dump_layer_inputs(model, ["conv1", "conv2", "pool", "fc"], batches, work)
        fq = os.path.join(work, f"fq{step}.safetensors")
        p = subprocess.run([ptq, "calibrate", cfg, "--model", os.path.join(work, "manifest.json"),
                            "--weights", os.path.join(work, "weights.safetensors"), "--batches",
                            *paths, "--fake-quant-weights", fq, "--quiet"], capture_output=True,
                           text=True)
        check(p.returncode == 0, f"pass {step}: ptq calibrate: {p.stderr}")
        model = recipe.digits_without_bias(examples)
        recipe.load_fake_quant_weights(model, fq, manifest)
        check(isinstance(model.bn2, torch.nn.Identity) and model.conv2.bias is not None,
              "conv2's fused BatchNorm is not an Identity with its bias on the conv")
        check(isinstance(model.bn1, torch.nn.BatchNorm2d) and model.conv1.bias is None,
              "conv1's BatchNorm (skip_fusion_layers) did not stay")
        fused_bias = recipe.read_safetensors(fq)["conv2.bias"]
        check(np.array_equal(model.conv2.bias.detach().numpy(), fused_bias),
              "conv2's fused bias is not the file's")
        acc = recipe.accuracy(model, images, labels)
        check(acc >= fp32 - 0.01, f"pass {step}: fake-quantized weights give {acc:.4f}, FP32 "
                                  f"{fp32:.4f}")
        print(f"pass {step}: {acc:.4f} with the fake-quantized weights (FP32 {fp32:.4f})")

    # The old recipe (BatchNorms set to identity, load_state_dict(strict=False)) drops it.
    old = recipe.digits_without_bias(examples)
    old.bn2 = torch.nn.Identity()
    dropped = old.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in
                                   recipe.read_safetensors(fq).items()}, strict=False)
    check("conv2.bias" in dropped.unexpected_keys, "strict=False kept conv2.bias")
    old_acc = recipe.accuracy(old, images, labels)
    check(old_acc < acc - 0.05, f"without its fused bias the model still gives {old_acc:.4f}")
    print(f"the old recipe (strict=False) drops conv2's fused bias: {old_acc:.4f}")

    # A file without the fused bias is an error, not a model that silently lost it.
    t = recipe.read_safetensors(fq)
    del t["conv2.bias"]
    broken = os.path.join(work, "broken.safetensors")
    recipe.save_safetensors(broken, t)
    try:
        recipe.load_fake_quant_weights(recipe.digits_without_bias(examples), broken, manifest)
        fail("a file without conv2.bias loaded")
    except RuntimeError as e:
        check("conv2.bias" in str(e), f"the error does not name conv2.bias: {e}")

    onnx_path = os.path.join(work, "model.onnx")
    recipe.export_onnx(recipe.digits_without_bias(examples), torch.zeros(1, 1, 8, 8), onnx_path)
    subprocess.run([ptq, "calibrate", cfg, "--model", os.path.join(work, "manifest.json"),
                    "--weights", os.path.join(work, "weights.safetensors"), "--batches", *paths,
                    "--record", os.path.join(work, "record.txt"), "--quiet"], check=True,
                   capture_output=True)
    p = subprocess.run([ptq, "export", "--format", "onnx-qdq", "--onnx", onnx_path, "--record",
                        os.path.join(work, "record.txt"), "--model",
                        os.path.join(work, "manifest.json"), "--config", cfg, "-o",
                        os.path.join(work, "qdq.onnx")], capture_output=True, text=True)
    check(p.returncode == 0, f"ptq export of the recipe's ONNX model: {p.stderr}")

    with open(os.path.join(examples, "pytorch", "recipe.py")) as f:
        source = f.read()
    with open(os.path.join(docs, "deploy.md")) as f:
        doc = f.read()
    for name in ("export", "dump", "load"):
        m = re.search(rf"# \[deploy:{name}\]\n(.*?)# \[/deploy:{name}\]\n", source, re.S)
        check(m is not None, f"recipe.py has no [deploy:{name}] region")
        check("```python\n" + m.group(1) + "```" in doc,
              f"docs/deploy.md does not quote recipe.py's [deploy:{name}] region as it is")
    print("torch_recipe: two passes, the fused bias kept, a missing one refused, the ONNX "
          "export read by ptq, the docs' snippets as in recipe.py")


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except Exception as e:
        import traceback
        traceback.print_exc()
        fail(f"{type(e).__name__}: {e}")
