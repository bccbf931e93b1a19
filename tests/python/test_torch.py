"""ptq.torch on the bundled digits network (ctest python_torch): the records are byte for byte
those `ptq calibrate` gives on the same layer inputs (written by save_inputs), for the IFMR,
HFMG, DMQ and AdaRound configs; the calibrated model loads its own state_dict strictly and keeps
its accuracy. PTQ_TOOL names the ptq binary."""
import os
import subprocess
import sys
import tempfile
import unittest

import torch

import ptq
import ptq.torch

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
DIGITS = os.path.join(SOURCE, "examples", "digits")
CONFIGS = os.path.join(SOURCE, "examples", "configs")
sys.path.insert(0, DIGITS)
from train import DigitsNet  # noqa: E402  (the bundled network's definition)


def digits():
    model = DigitsNet()
    weights = {k: torch.from_numpy(v) for k, v in
               ptq.read_safetensors(os.path.join(DIGITS, "model.safetensors")).items()}
    model.load_state_dict(weights, strict=False)  # num_batches_tracked is not stored
    calib = ptq.read_safetensors(os.path.join(DIGITS, "calib.safetensors"))
    test = ptq.read_safetensors(os.path.join(DIGITS, "test.safetensors"))
    images = torch.from_numpy(calib["images"])
    return model.eval(), [images[:32], images[32:64]], images, test


def accuracy(model, test):
    with torch.no_grad():
        logits = model(torch.from_numpy(test["images"]))
    return (logits.argmax(1).numpy() == test["labels"]).mean()


class OwnModelInOnnxRuntime(unittest.TestCase):
    """A model of its own (BN, a depthwise conv, ReLU6, pooling, two Linears), calibrated from
    Python and exported as a QDQ model: ONNX Runtime runs its layers on int8 kernels, and its
    classes agree with the float model's on 99.5 % of 1000 inputs or more."""

    def test_qdq_model(self):
        import onnx
        sys.path.insert(0, os.path.join(SOURCE, "examples", "python"))
        sys.path.insert(0, os.path.join(SOURCE, "tests", "tools", "ort"))
        from torch_usage import SmallNet
        from ort_common import Ort
        torch.manual_seed(0)
        model = SmallNet().eval()
        with torch.no_grad():
            model.bn.running_mean.uniform_(-0.5, 0.5)
            model.bn.running_var.uniform_(0.5, 2.0)
        calib = [torch.randn(32, 3, 8, 8) for _ in range(2)]
        cal = ptq.torch.calibrate(model, ptq.parse_config("batch_num: 2\n"), calib)
        with tempfile.TemporaryDirectory(prefix="ptq-torch-qdq-") as d:
            path = cal.export_onnx(os.path.join(d, "int8.onnx"), calib[0][:1],
                                   ptq_tool=os.environ["PTQ_TOOL"])
            x = torch.randn(1000, 3, 8, 8)
            with torch.no_grad():
                want = model(x).argmax(1).numpy()
            optimized = os.path.join(d, "optimized.onnx")
            outs, _ = Ort().run(path, x.numpy(), input_name="input", optimized=optimized)
            agreement = (outs["output"].argmax(1) == want).mean()
            self.assertGreaterEqual(agreement, 0.995)
            ops = {n.op_type for n in onnx.load(optimized).graph.node}
            self.assertTrue({"QLinearConv", "QGemm", "QLinearAveragePool"} <= ops, ops)
            self.assertFalse({"Conv", "Gemm", "MatMul"} & ops, ops)


class RecordsAsTheTool(unittest.TestCase):
    def check_config(self, name):
        model, batches, images, test = digits()
        with tempfile.TemporaryDirectory(prefix="ptq-torch-test-") as d:
            cal = ptq.torch.calibrate(model, os.path.join(CONFIGS, name), batches,
                                      ada_data=images, save_inputs=d)
            tool = os.environ["PTQ_TOOL"]
            command = [tool, "calibrate", os.path.join(d, "quant.cfg"), "--model",
                       os.path.join(d, "manifest.json"), "--weights",
                       os.path.join(d, "weights.safetensors"), "--batches",
                       os.path.join(d, "batch0.safetensors"),
                       os.path.join(d, "batch1.safetensors"), "--record",
                       os.path.join(d, "record.txt"), "--quiet"]
            for option, file in (("--dmq-data", "dmq"), ("--ada-data", "ada"),
                                 ("--ada-float-data", "ada_float")):
                if os.path.exists(os.path.join(d, file + ".safetensors")):
                    command += [option, os.path.join(d, file + ".safetensors")]
            done = subprocess.run(command, capture_output=True, text=True)
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(os.path.join(d, "record.txt"), encoding="utf-8") as f:
                self.assertEqual(cal.record.text(), f.read())
        # The calibrated model: its own state_dict loads strictly, and it still classifies.
        cal.model.load_state_dict(cal.state_dict(), strict=True)
        self.assertGreater(accuracy(cal.model, test), accuracy(model, test) - 0.02)
        return cal

    def test_ifmr(self):
        cal = self.check_config("quant.cfg")
        # DMQ on conv1 (quant.cfg): its input is divided, so the float model's conv1 is folded.
        self.assertTrue(cal.session.layer("conv1")["balance_factors"])

    def test_hfmg(self):
        self.check_config("quant_hfmg.cfg")

    def test_dmq(self):
        self.check_config("dmq_balancer.cfg")

    def test_ada(self):
        cal = self.check_config("digits_ada.cfg")
        self.assertEqual(cal.record.layers["conv1"]["wts_type"], "INT8")

    def test_auto_calibrate(self):
        """No accuracy may be lost: every layer quantized loses a test image, so the binary search
        keeps conv1 (the lowest estimated SQNR) in float, in 3 evaluations of 3 ranked layers
        (as `ptq calibrate --auto-accuracy 0` on the same model)."""
        model, batches, _, test = digits()
        auto = ptq.torch.auto_calibrate(model, os.path.join(CONFIGS, "quant.cfg"), batches,
                                        evaluate=lambda m: accuracy(m, test), max_drop=0.0)
        self.assertEqual(auto.ranking, ["conv1", "fc", "conv2"])
        self.assertEqual([s[0] for s in auto.steps], [[], ["conv1", "fc"], ["conv1"]])
        self.assertEqual([s[1] for s in auto.steps], [False, True, True])
        self.assertEqual(auto.skip_layers, ["conv1"])
        self.assertTrue(auto.accepted)
        self.assertNotIn("conv1", auto.calibration.record.layers)

    def test_layers_found(self):
        model, _, _, _ = digits()
        found = [(l.name, l.type, l.batch_norm, l.activation and l.activation["kind"])
                 for l in ptq.torch.find_layers(model)]
        self.assertEqual(found, [("conv1", "Conv2d", "bn1", "ReLU"),
                                 ("conv2", "Conv2d", "bn2", "ReLU"),
                                 ("pool", "AvgPool2d", None, None),
                                 ("fc", "Linear", None, None)])

    def test_model_left_alone(self):
        model, batches, _, _ = digits()
        before = {k: v.clone() for k, v in model.state_dict().items()}
        ptq.torch.calibrate(model, os.path.join(CONFIGS, "quant.cfg"), batches)
        for k, v in model.state_dict().items():
            self.assertTrue(torch.equal(v, before[k]), k)

    def test_input_changed_after_its_layer(self):
        """ptq.torch lets one-pass IFMR hold the layer inputs instead of copies; a model that
        changes one in place after its layer ran is an error naming the layer and the batch,
        not a record of values the layer never saw."""
        class ChangesFcInput(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = torch.nn.Conv2d(1, 2, 3)
                self.fc = torch.nn.Linear(2 * 6 * 6, 3)

            def forward(self, x):
                h = torch.relu(self.conv(x)).flatten(1)
                y = self.fc(h)
                h.mul_(2.0)  # fc's input, after fc ran
                return y

        torch.manual_seed(0)
        batches = [torch.randn(4, 1, 8, 8) for _ in range(2)]
        with self.assertRaisesRegex(RuntimeError, "layer 'fc': its input of batch 0 was changed "
                                                  "in place after the layer ran"):
            ptq.torch.calibrate(ChangesFcInput().eval(), "batch_num: 2", batches)
        # The bounded mode holds no inputs, so the same model calibrates.
        cal = ptq.torch.calibrate(ChangesFcInput().eval(), "batch_num: 2", batches,
                                  activation_mode="bounded")
        self.assertIn("fc", cal.record.layers)

    def test_too_few_batches(self):
        model, batches, _, _ = digits()
        with self.assertRaisesRegex(ValueError, "batch_num is 2 but 1 batches"):
            ptq.torch.calibrate(model, os.path.join(CONFIGS, "quant.cfg"), batches[:1])


if __name__ == "__main__":
    unittest.main()
