"""ptq.amct, the toolkit's PyTorch API, on the bundled digits network (ctest python_amct): a
script written for the toolkit gives the record ptq.torch gives on the same data (and so, by
test_torch, `ptq calibrate`'s), for the IFMR, HFMG, DMQ and AdaRound configs; save_model's deploy
model carries the numbers of `ptq export --format amct-deploy`, and its fake-quant model keeps the
accuracy in ONNX Runtime. PTQ_TOOL names the ptq binary."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import onnx
import torch
from onnx import numpy_helper

import ptq
import ptq.amct as amct
import ptq.torch

from test_torch import CONFIGS, digits

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "ort"))


def toolkit_script(model, config_file, images, work):
    """A toolkit user's script, verbatim but for the import: the files it writes."""
    config = os.path.join(work, "config.json")
    record = os.path.join(work, "record.txt")
    modified = os.path.join(work, "modified.onnx")
    amct.create_quant_config(config, model, images[:1], config_defination=config_file)
    with open(config, encoding="utf-8") as f:
        uses_dmq = "dmq_balancer_param" in f.read()
    if uses_dmq:
        calib = amct.quantize_preprocess(config, record, model, images[:32])
        calib(images[:32])
    calib = amct.quantize_model(config, modified, record, model, images, input_names=["images"],
                                output_names=["logits"],
                                dynamic_axes={"images": {0: "n"}, "logits": {0: "n"}})
    calib(images[:32])
    calib(images[32:64])
    amct.save_model(modified, record, os.path.join(work, "out", "digits"))
    return config, record, modified


class ToolkitApi(unittest.TestCase):
    def check_config(self, name):
        model, batches, images, _ = digits()
        config_file = os.path.join(CONFIGS, name)
        with tempfile.TemporaryDirectory(prefix="ptq-amct-test-") as d:
            _, record, _ = toolkit_script(model, config_file, images, d)
            with open(record, encoding="utf-8") as f:
                written = f.read()
        cal = ptq.torch.calibrate(model, config_file, batches, ada_data=images)
        self.assertEqual(written, cal.record.text())

    def test_ifmr(self):
        self.check_config("quant.cfg")

    def test_hfmg(self):
        self.check_config("quant_hfmg.cfg")

    def test_dmq(self):
        self.check_config("dmq_balancer.cfg")

    def test_ada(self):
        self.check_config("digits_ada.cfg")

    def test_accuracy_based_auto_calibration(self):
        """The toolkit's evaluator interface: no loss accepted keeps conv1 in float; the files
        the toolkit writes are there, and config_file ends with conv1's quant_enable false."""
        model, _, images, test = digits()

        class Evaluator:  # amct_pytorch's AutoCalibrationEvaluatorBase methods
            def __init__(self):
                self.calibrations = 0

            def calibration(self, calib_model):
                self.calibrations += 1
                calib_model(images[:32])
                calib_model(images[32:64])

            def evaluate(self, m):
                with torch.no_grad():
                    logits = m(torch.from_numpy(test["images"]))
                return float((logits.argmax(1).numpy() == test["labels"]).mean())

            def metric_eval(self, original, new):
                return original - new <= 0.0, original - new

        with tempfile.TemporaryDirectory(prefix="ptq-amct-auto-") as d:
            config = os.path.join(d, "config.json")
            amct.create_quant_config(config, model, images[:1],
                                     config_defination=os.path.join(CONFIGS, "quant.cfg"))
            cwd = os.getcwd()
            os.chdir(d)  # ./amct_log, as the toolkit writes it
            try:
                evaluator = Evaluator()
                result = amct.accuracy_based_auto_calibration(
                    model, evaluator, config, os.path.join(d, "record.txt"),
                    os.path.join(d, "out", "digits"), images, input_names=["images"],
                    dynamic_axes={"images": {0: "n"}})
            finally:
                os.chdir(cwd)
            self.assertEqual(result["skip_layers"], ["conv1"])
            # quant.cfg has DMQ: the preprocess run, 3 evaluations and the final set's
            self.assertEqual(evaluator.calibrations, 5)
            with open(config, encoding="utf-8") as f:
                final = json.load(f)
            self.assertFalse(final["conv1"]["quant_enable"])
            self.assertTrue(final["conv2"]["quant_enable"])
            for f in ("out/accuracy_based_auto_calibration_ranking_information.json",
                      "out/accuracy_based_auto_calibration_final_config.json",
                      "amct_log/accuracy_based_auto_calibration_record.json",
                      "out/digits_deploy_model.onnx", "out/digits_fake_quant_model.onnx"):
                self.assertTrue(os.path.exists(os.path.join(d, f)), f)

    def test_create_quant_config(self):
        model, _, images, _ = digits()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "config.json")
            amct.create_quant_config(path, model, images[:1], skip_layers=["fc"], batch_num=2)
            with open(path, encoding="utf-8") as f:
                j = json.load(f)
            self.assertEqual(j["batch_num"], 2)
            self.assertFalse(j["fc"]["quant_enable"])
            self.assertTrue(j["conv1"]["quant_enable"])
            with self.assertRaises(ptq.Error) as e:
                amct.create_quant_config(path, model, images[:1], skip_layers=["nope"])
            self.assertEqual(e.exception.code, "E401")

    def test_deploy_numbers_and_fake_quant_accuracy(self):
        model, batches, images, test = digits()
        config_file = os.path.join(CONFIGS, "dmq_balancer.cfg")
        with tempfile.TemporaryDirectory(prefix="ptq-amct-test-") as d:
            _, record, _ = toolkit_script(model, config_file, images, d)
            ptq.torch.calibrate(model, config_file, batches, save_inputs=os.path.join(d, "m"))
            numbers = os.path.join(d, "deploy.json")
            done = subprocess.run(
                [os.environ["PTQ_TOOL"], "export", "--format", "amct-deploy", "--record", record,
                 "--model", os.path.join(d, "m", "manifest.json"), "--weights",
                 os.path.join(d, "m", "weights.safetensors"), "--config", config_file, "-o",
                 numbers], capture_output=True, text=True)
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(numbers, encoding="utf-8") as f:
                want = {l["name"]: l for l in json.load(f)["layers"]}
            deploy = onnx.load(os.path.join(d, "out", "digits_deploy_model.onnx"))
            inits = {t.name: numpy_helper.to_array(t) for t in deploy.graph.initializer}
            nodes = {n.name: n for n in deploy.graph.node}
            for name, w in want.items():
                q = nodes[name + ".quant"]
                attrs = {a.name: onnx.helper.get_attribute_value(a) for a in q.attribute}
                self.assertEqual(np.float32(attrs["scale"]), np.float32(w["quant"]["scale"]))
                self.assertEqual(attrs["offset"], w["quant"]["offset"])
                self.assertEqual(attrs["dst_type"].decode(), w["quant"]["dst_type"])
                params = [int(p) for p in inits[name + ".dequant.param"]]
                self.assertEqual(params, w["dequant"]["param"], name)
                if "bias_int32" in w:
                    self.assertEqual(inits[name + ".bias"].tolist(), w["bias_int32"], name)
                if "dmq_mul" in w:
                    mul = inits[name + ".mul.factor"].reshape(-1).tolist()
                    self.assertEqual(mul, [np.float32(v).item() for v in w["dmq_mul"]])
            # The fake-quant model in ONNX Runtime keeps the float model's accuracy.
            from ort_common import Ort
            ort = Ort()
            fake = os.path.join(d, "out", "digits_fake_quant_model.onnx")
            x = test["images"]
            outs, _ = ort.run(fake, x, input_name="images")
            predicted = outs["logits"].argmax(1)
            accuracy = (predicted == test["labels"]).mean()
            self.assertGreater(accuracy, 0.98)


if __name__ == "__main__":
    unittest.main()
