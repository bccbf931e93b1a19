"""The Python module's bindings (ctest python_bindings): tensors reach the library without a copy,
errors are ptq.Error with their codes and positions, and the numbers are the library's."""
import os
import sys
import tracemalloc
import unittest

import numpy as np
import torch

import ptq

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))


class ZeroCopy(unittest.TestCase):
    """The library is handed the caller's own memory, for every dtype and layout."""

    def check(self, x, pointer, dtype, strides):
        v = ptq._ptq._view_of(x)
        self.assertEqual(v["data"], pointer)
        self.assertEqual(v["dtype"], dtype)
        self.assertEqual(v["shape"], list(x.shape))
        self.assertEqual(v["strides"], strides)

    def test_numpy(self):
        a = np.arange(24, dtype=np.float32).reshape(4, 6)
        self.check(a, a.__array_interface__["data"][0], "float32", [6, 1])
        t = a.T
        self.check(t, a.__array_interface__["data"][0], "float32", [1, 6])
        r = a[::-1, ::2]  # a negative stride: the data pointer is the last row's
        self.check(r, r.__array_interface__["data"][0], "float32", [-6, 2])
        h = a.astype(np.float16)
        self.check(h, h.__array_interface__["data"][0], "float16", [6, 1])

    def test_torch(self):
        t = torch.arange(24, dtype=torch.float32).reshape(4, 6)
        self.check(t, t.data_ptr(), "float32", [6, 1])
        self.check(t.t(), t.data_ptr(), "float32", [1, 6])
        b = t.to(torch.bfloat16)[1:, ::2]  # storage offset and a stride of 2
        self.check(b, b.data_ptr(), "bfloat16", [6, 2])
        h = t.half()
        self.check(h, h.data_ptr(), "float16", [6, 1])
        p = torch.nn.Parameter(t.clone())  # requires_grad: read as it is, no detach needed
        self.check(p, p.data_ptr(), "float32", [6, 1])

    def test_observing_copies_no_batch(self):
        """HFMG keeps a histogram only: observing a 4 MiB batch allocates nothing of its size."""
        x = np.random.default_rng(1).standard_normal((1024, 1024)).astype(np.float32)
        o = ptq.HfmgObserver(num_of_bins=1024)
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            o.observe(x.T)  # strided: read where it lies, a block at a time
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        self.assertLess(peak, 64 * 1024)

    def test_refused(self):
        with self.assertRaisesRegex(TypeError, "float32 or float16"):
            ptq._ptq._view_of(np.zeros(3, dtype=np.float64))
        with self.assertRaisesRegex(TypeError, "float32, float16 or bfloat16"):
            ptq._ptq._view_of(torch.zeros(3, dtype=torch.int32))
        with self.assertRaisesRegex(TypeError, "numpy.ndarray or a torch.Tensor"):
            ptq._ptq._view_of([1.0, 2.0])
        with self.assertRaisesRegex(ValueError, "negated view"):
            ptq._ptq._view_of(torch.ones(3)._neg_view())


class Numbers(unittest.TestCase):
    """Every layout gives the numbers of the float32 values in C order, bit for bit."""

    def test_observers(self):
        rng = np.random.default_rng(2)
        x = rng.standard_normal((96, 80)).astype(np.float32)
        for make in (lambda: ptq.HfmgObserver(num_of_bins=2048), lambda: ptq.IfmrObserver()):
            plain, strided, torched = make(), make(), make()
            plain.observe(np.ascontiguousarray(x.T))
            strided.observe(x.T)
            torched.observe(torch.from_numpy(x).t())
            self.assertEqual(plain.estimate(), strided.estimate())
            self.assertEqual(plain.estimate(), torched.estimate())
        # bfloat16 values: the results of their float32 values.
        b = torch.from_numpy(x).to(torch.bfloat16)
        a1, a2 = ptq.HfmgObserver(num_of_bins=1024), ptq.HfmgObserver(num_of_bins=1024)
        a1.observe(b)
        a2.observe(b.float())
        self.assertEqual(a1.estimate(), a2.estimate())

    def test_estimate_and_reset(self):
        o = ptq.HfmgObserver(num_of_bins=1024)
        with self.assertRaises(ptq.Error) as e:
            o.estimate()
        self.assertEqual(e.exception.code, "E907")
        o.observe(np.linspace(-1, 3, 4096, dtype=np.float32))
        first = o.estimate()
        o.observe(np.linspace(-4, 1, 4096, dtype=np.float32))
        self.assertNotEqual(o.estimate(), first)
        o.reset()
        o.observe(np.linspace(-1, 3, 4096, dtype=np.float32))
        self.assertEqual(o.estimate(), first)

    def test_arq_and_dmq(self):
        w = np.array([[[[0.5]], [[-1.0]]], [[[2.0]], [[0.25]]]], dtype=np.float32)  # [2, 2, 1, 1]
        r = ptq.arq(w, "Conv2d", fake_quantize=True)
        # Channel 0 reaches -1 below: the divisor is 128 (docs/numerics.md, ARQ); channel 1: 127.
        self.assertEqual(r["scale"], [np.float32(1.0 / 128).item(), np.float32(2.0 / 127).item()])
        self.assertEqual(r["offset"], [0, 0])
        self.assertEqual(r["weight"].dtype, np.float32)
        self.assertEqual(r["weight"][1, 0, 0, 0], 2.0)
        f = ptq.dmq_factors(np.ones((1, 2, 3, 3), np.float32), w, "Conv2d", migration_strength=0.5)
        self.assertEqual(len(f), 2)


class Errors(unittest.TestCase):
    """ptq.Error carries the library's code, name, message and position."""

    def test_config_error(self):
        with self.assertRaises(ptq.Error) as e:
            ptq.parse_config("batch_num: 2\ncommon_config { arq_quantize { quant_bit: 8 } }\n",
                             "quant.cfg")
        err = e.exception
        self.assertEqual((err.code, err.name), ("E201", "unknown_field"))
        self.assertEqual((err.path, err.line, err.column), ("quant.cfg", 2, 32))
        self.assertIn("quant_bits", err.note)
        self.assertTrue(str(err).startswith("quant.cfg:2:32: unknown field 'quant_bit'"))
        self.assertIsInstance(err, ValueError)

    def test_settings_and_session_errors(self):
        with self.assertRaises(ptq.Error) as e:
            ptq.IfmrObserver(search_range=(1.3, 0.7))
        self.assertEqual(e.exception.code, "E302")
        layers = [{"name": "fc", "type": "Linear",
                   "weight": np.ones((3, 8), np.float32)}]
        s = ptq.Session(ptq.parse_config("batch_num: 1"), layers)
        s.quantize_weights()
        with self.assertRaises(ptq.Error) as e:
            s.feed("fc", np.ones((2, 7), np.float32))
        self.assertEqual(e.exception.code, "E803")
        self.assertEqual(e.exception.message,
                         "fc input [2, 7]: has 7 input channels (axis -1); the layer takes 8")

    def test_pickles(self):
        import pickle
        try:
            ptq.parse_config("batch_num: 0")
        except ptq.Error as err:
            back = pickle.loads(pickle.dumps(err))
            self.assertEqual((back.code, back.line, back.message), (err.code, err.line,
                                                                   err.message))


class SessionAndRecord(unittest.TestCase):
    def test_weight_quantized_where_it_lies(self):
        w = torch.linspace(-1, 1, 24).reshape(3, 8).contiguous()
        layers = [{"name": "fc", "type": "Linear", "weight": w, "weight_out": w}]
        s = ptq.Session(ptq.parse_config("batch_num: 1"), layers)
        s.quantize_weights()
        out = s.weight("fc")
        self.assertEqual(out.__array_interface__["data"][0], w.data_ptr())
        self.assertTrue(np.array_equal(out, w.numpy()))
        s.feed("fc", torch.ones(4, 8))
        rec = s.record()
        self.assertEqual(ptq.parse_record(rec.text()), rec)
        self.assertEqual(ptq.read_record_json(rec.json()), rec)
        self.assertIn("fc", rec.layers)
        self.assertIn("TRT-8601-EntropyCalibration2", rec.export("trt-cache", trt_version="8601"))

    def test_feed_keep_holds_the_batch(self):
        """keep=True: one-pass IFMR holds the float32 tensor itself until the layer's last batch
        (its reference count says so) and gives the record a copy gives; HFMG holds nothing."""
        def session(algo):
            w = torch.linspace(-1, 1, 24).reshape(3, 8).contiguous()
            layers = [{"name": "fc", "type": "Linear", "weight": w}]
            text = "batch_num: 2\n" + ("" if algo == "ifmr" else
                                         "common_config { hfmg_quantize { num_of_bins: 4096 } }")
            s = ptq.Session(ptq.parse_config(text), layers)
            s.quantize_weights()
            return s
        batches = [torch.linspace(-3, 5, 64).reshape(8, 8) * (b + 1) for b in range(2)]
        records = []
        for keep in (False, True):
            s = session("ifmr")
            refs = sys.getrefcount(batches[0])
            s.feed("fc", batches[0], keep=keep)
            self.assertEqual(sys.getrefcount(batches[0]), refs + (1 if keep else 0))
            s.feed("fc", batches[1], keep=keep)  # the last batch: the layer is finalized
            self.assertEqual(sys.getrefcount(batches[0]), refs)
            records.append(s.record().text())
        self.assertEqual(records[0], records[1])
        s = session("hfmg")
        refs = sys.getrefcount(batches[0])
        s.feed("fc", batches[0], keep=True)
        self.assertEqual(sys.getrefcount(batches[0]), refs)

    def test_safetensors_round_trip(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.safetensors")
            ptq.write_safetensors(path, {"a": np.arange(6, dtype=np.float32).reshape(2, 3),
                                         "b": torch.ones(2, dtype=torch.bfloat16)})
            back = ptq.read_safetensors(path)
            self.assertEqual(back["a"].tolist(), [[0, 1, 2], [3, 4, 5]])
            self.assertEqual(back["b"].tolist(), [1.0, 1.0])


if __name__ == "__main__":
    unittest.main()
