"""ptq.torch: calibrate a torch.nn.Module with ptq, from the module's own forward passes.

    import ptq.torch
    cal = ptq.torch.calibrate(model, "quant.cfg", batches)      # batches: model inputs
    cal.record.text()            # the toolkit's record, byte for byte what `ptq calibrate` gives
    cal.model                    # the fused model with fake-quantized weights
    cal.model.load_state_dict(cal.state_dict(), strict=True)
    cal.export_onnx("model_int8.onnx", example_input)          # the QDQ model (needs the tool)

How the layers are found (docs/python.md): torch.fx traces the model; the quantizable modules
(Conv1d/2d/3d, ConvTranspose1d/2d, Linear, AvgPool2d, by class name as the toolkit matches
them) that the forward pass calls are the layers, named by their module path; a BatchNorm whose
input is a Conv's output, and the Conv's only use, is fused with it; the activation module or
function that is a layer's (or its BatchNorm's) only use is the layer's activation (AdaRound
reconstructs through it). The phases are the toolkit's: the DMQ factors from the first batch
through the fused float model, the weights, each AdaRound layer from `ada_data` with the layers
before it quantized (its target from the same data with every AdaRound layer in float), then
`batch_num` batches with fake-quantized weights and float activations.
"""
import copy
import os
import subprocess
import sys
import weakref

import torch

import ptq
from ptq._torch_fake_quant import _balance_input_shape, _balance_shape, _input_quantizer, \
    _input_sqnr
from ptq._torch_layers import _LAYER_TYPES, Layer, _layer_dict, _set_submodule, _tuple, \
    _write_model_files, find_layers

__all__ = ["AutoCalibration", "Calibration", "Layer", "auto_calibrate", "calibrate",
           "find_layers"]

class _Inputs:
    """Forward pre-hooks on the layers: what each layer's input is used for in the current
    phase (`on_input(name, x)`), and the DMQ division of the inputs of balanced layers."""

    def __init__(self, model, layers):
        self.on_input = None
        self.divide = {}
        self._handles = [model.get_submodule(l.name).register_forward_pre_hook(self._hook(l.name))
                         for l in layers]

    def _hook(self, name):
        def hook(_module, args):
            x = args[0]
            if self.on_input is not None:
                self.on_input(name, x)
            s = self.divide.get(name)
            if s is None:
                return None
            return (x / s,) + tuple(args[1:])
        return hook

    def remove(self):
        for h in self._handles:
            h.remove()


class Calibration:
    """A finished calibration: `record` (ptq.Record), `model` (the fused model, its weights
    fake-quantized, BatchNorms folded where the config fused them), `layers`, `session`;
    `activation_sqnr_db` (with calibrate's activation_sqnr)."""

    def __init__(self, record, model, layers, session, config, original):
        self.record, self.model, self.layers, self.session = record, model, layers, session
        self._config, self._original = config, original
        self.activation_sqnr_db = {}

    def fake_quant_model(self):
        """`model` with every quantized layer's input quantize-dequantized with the record's
        scale_d and offset_d (divided by its DMQ factors first): the toolkit's fake-quant model,
        to evaluate the accuracy a deployment keeps."""
        fq = copy.deepcopy(self.model)
        for layer in self.layers:
            info = self.session.layer(layer.name)
            if info["quant_enable"]:
                module = fq.get_submodule(layer.name)
                module.register_forward_pre_hook(_input_quantizer(layer, module, info))
        return fq

    def state_dict(self):
        """The fused, fake-quantized weights: loads with strict=True into `model`."""
        return self.model.state_dict()

    def export_onnx(self, path, example_input, ptq_tool="ptq", engine=None, input_names=None,
                    output_names=None):
        """The QDQ model an engine runs in int8 (docs/deploy.md): the float model exported by
        torch.onnx.export with the flags ptq's exporter needs (opset 13, BatchNorms kept as
        nodes, initializers under their state_dict names; the batch axis of every input and
        output dynamic), then `ptq export --format onnx-qdq` (the tool, built with libonnx:
        `ptq_tool` names it). Returns `path`."""
        import tempfile
        inputs = _tuple(example_input)
        input_names = input_names or [f"input{i}" if i else "input" for i in range(len(inputs))]
        output_names = output_names or ["output"]
        axes = {n: {0: "batch"} for n in list(input_names) + list(output_names)}
        with tempfile.TemporaryDirectory(prefix="ptq-torch-") as work:
            float_onnx = os.path.join(work, "float.onnx")
            with torch.no_grad():
                torch.onnx.export(self._original.eval(), inputs, float_onnx, opset_version=13,
                                  training=torch.onnx.TrainingMode.PRESERVE,
                                  do_constant_folding=False, input_names=input_names,
                                  output_names=output_names, dynamic_axes=axes)
            _write_model_files(work, self._original, self.layers)
            record = os.path.join(work, "record.txt")
            config = os.path.join(work, "quant.cfg")
            with open(record, "w", encoding="utf-8") as f:
                f.write(self.record.text())
            with open(config, "w", encoding="utf-8") as f:
                f.write(self._config.text())
            command = [ptq_tool, "export", "--format", "onnx-qdq", "--onnx", float_onnx,
                       "--record", record, "--model", os.path.join(work, "manifest.json"),
                       "--config", config, "-o", path]
            if engine is not None:
                command += ["--engine", engine]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                raise ptq.Error(f"ptq export failed: {done.stderr.strip()}", code="E1100")
        return path


def _as_config(config):
    if isinstance(config, ptq.Config):
        return config
    if isinstance(config, str) and os.path.exists(config):
        return ptq.read_config(config)
    return ptq.parse_config(config, "config")


def _forward(model, batch):
    with torch.no_grad():
        model(*_tuple(batch))


def calibrate(model, config, batches, *, ada_data=None, threads=1, activation_mode="one_pass",
              ada_seed=0, keep_search_stats=False, save_inputs=None, activation_sqnr=False):
    """Calibrates `model` (left unchanged) with `config` (a ptq.Config, a path or the text) on
    `batches` (model inputs: tensors or tuples of tensors; the config's batch_num of them are
    used). `ada_data`: the AdaRound samples (model input; default the first batch).
    `save_inputs`: a folder to write every layer input fed, with a manifest and the weights, so
    that `ptq calibrate` reproduces the record (docs/python.md). `activation_sqnr`: measure each
    quantized layer's input SQNR on the last batch (Calibration.activation_sqnr_db; that batch's
    inputs are kept until the end). Returns a Calibration."""
    config = _as_config(config)
    batches = list(batches)
    batch_num = config.batch_num
    if len(batches) < batch_num:
        raise ValueError(f"the config's batch_num is {batch_num} but {len(batches)} batches were "
                         "given")
    original = model
    model = copy.deepcopy(model).eval()
    layers = find_layers(model)
    if not layers:
        raise ValueError("the model has no layer ptq quantizes (" + ", ".join(_LAYER_TYPES) + ")")
    modules = dict(model.named_modules())
    descs = [_layer_dict(l, modules[l.name], modules[l.batch_norm] if l.batch_norm else None)
             for l in layers]
    session = ptq.Session(config, descs, threads=threads, activation_mode=activation_mode,
                          keep_search_stats=keep_search_stats, ada_seed=ada_seed)
    saved = _Saved(save_inputs)
    _adopt_fusions(model, layers, session)
    hooks = _Inputs(model, layers)
    try:
        _dmq_phase(model, session, hooks, batches[0], saved)
        session.quantize_weights()
        _use_working_weights(model, layers, session, hooks)
        _ada_phase(model, layers, session, hooks, batches[0] if ada_data is None else ada_data,
                   saved)
        last = {} if activation_sqnr else None
        _activation_phase(model, session, hooks, batches[:batch_num], saved, last)
    finally:
        hooks.remove()
    record = session.record()
    _fold_balance(model, layers, session)
    saved.finish(original, layers, config)
    cal = Calibration(record, model, layers, session, config, original)
    if last is not None:
        cal.activation_sqnr_db = {n: _input_sqnr(x, session.layer(n))
                                  for n, x in last.items()}
    return cal


def _use_working_weights(model, layers, session, hooks=None):
    """The session's working weights and biases into the model's parameters (where the session
    did not write them itself), and, for the balanced layers, the division of their inputs."""
    for layer in layers:
        if layer.type == "AvgPool2d":
            continue
        module = model.get_submodule(layer.name)
        w = torch.from_numpy(session.weight(layer.name))
        if w.data_ptr() != module.weight.data_ptr():
            with torch.no_grad():
                module.weight.copy_(w.reshape(module.weight.shape))
        b = session.bias(layer.name)
        if b is not None:
            b = torch.from_numpy(b).to(module.weight.dtype)
            if module.bias is None:
                module.bias = torch.nn.Parameter(b.clone())
            else:
                with torch.no_grad():
                    module.bias.copy_(b)
        factors = session.layer(layer.name)["balance_factors"]
        if hooks is not None and factors:
            x_shape = _balance_input_shape(layer.type, module)
            hooks.divide[layer.name] = torch.tensor(factors, dtype=torch.float32).reshape(x_shape)


def _adopt_fusions(model, layers, session):
    """Replaces each BatchNorm the session fused by Identity; the fused weight and bias go in."""
    for layer in layers:
        if layer.batch_norm is not None and session.layer(layer.name)["fused"]:
            _set_submodule(model, layer.batch_norm, torch.nn.Identity())
    _use_working_weights(model, layers, session)


class _Saved:
    """The layer inputs fed, by purpose and layer, written to `folder` as the files
    `ptq calibrate` reads (None: nothing kept)."""

    def __init__(self, folder):
        self.folder = folder
        self.tensors = {}

    def add(self, purpose, name, x):
        if self.folder is not None:
            self.tensors.setdefault(purpose, {})[name] = x.detach().clone()

    def finish(self, original, layers, config):
        if self.folder is None:
            return
        os.makedirs(self.folder, exist_ok=True)
        _write_model_files(self.folder, original, layers)
        for purpose, tensors in self.tensors.items():
            ptq._ptq._write_safetensors(os.path.join(self.folder, purpose + ".safetensors"),
                                        list(tensors.items()))
        with open(os.path.join(self.folder, "quant.cfg"), "w", encoding="utf-8") as f:
            f.write(config.text())


def _capture(model, hooks, batch, wanted):
    """The inputs of the layers in `wanted` (name -> None, filled in) on one forward pass."""
    def keep(name, x):
        if name in wanted and wanted[name] is None:
            wanted[name] = x.detach().clone()
    hooks.on_input = keep
    try:
        _forward(model, batch)
    finally:
        hooks.on_input = None
    missing = [n for n, x in wanted.items() if x is None]
    if missing:
        raise ValueError(f"layer '{missing[0]}' was not called by the forward pass")
    return wanted


def _dmq_phase(model, session, hooks, batch, saved):
    names = session.dmq_layers()
    if not names:
        return
    inputs = _capture(model, hooks, batch, {n: None for n in names})
    for name in names:
        session.feed_dmq(name, inputs[name])
        saved.add("dmq", name, inputs[name])


def _ada_phase(model, layers, session, hooks, data, saved):
    names = session.ada_layers()
    if not names:
        return
    # The AdaRound layers' float (balanced) weights, for the target's forward pass.
    float_weights = {n: model.get_submodule(n).weight.detach().clone() for n in names}
    for name in names:
        x = _capture(model, hooks, data, {name: None})[name]
        quantized = {n: model.get_submodule(n).weight.detach().clone() for n in names}
        with torch.no_grad():
            for n in names:
                model.get_submodule(n).weight.copy_(float_weights[n])
        try:
            x_float = _capture(model, hooks, data, {name: None})[name]
        finally:
            with torch.no_grad():
                for n in names:
                    model.get_submodule(n).weight.copy_(quantized[n])
        session.quantize_ada(name, x, x_float)
        saved.add("ada", name, x)
        saved.add("ada_float", name, x_float)
        _use_working_weights(model, [l for l in layers if l.name == name], session)


def _activation_phase(model, session, hooks, batches, saved, last=None):
    """batch_num batches (twice in the bounded mode); `last` (a dict) gets each layer's input of
    the last batch, for its SQNR."""
    enabled = {l for l in session.pending()}
    lent = {}  # layer -> [(batch, weak reference, version)] of the inputs the session holds
    for p in range(session.activation_passes):
        for b, batch in enumerate(batches):
            def feed(name, x, b=b, first=p == 0):
                if name in enabled:
                    held = lent.setdefault(name, [])
                    _check_unchanged(name, held)
                    lend = _owns_its_storage(x)
                    refs = sys.getrefcount(x)
                    session.feed(name, x, keep=lend)
                    if lend and sys.getrefcount(x) > refs:  # the session holds x (one-pass IFMR)
                        held.append((b, weakref.ref(x), x._version))
                    if b + 1 == len(batches):
                        held.clear()  # the layer is finalized: the session let go of them
                    if first:
                        saved.add(f"batch{b}", name, x)
                        if last is not None and b + 1 == len(batches):
                            last[name] = x.detach().clone()
            hooks.on_input = feed
            try:
                _forward(model, batch)
            finally:
                hooks.on_input = None


def _owns_its_storage(x):
    """Whether the session may hold x instead of copying it: a float32 CPU tensor in C order
    that is its storage's only view (holding a slice would keep its whole storage alive)."""
    storage = getattr(x, "untyped_storage", x.storage)  # torch 2 deprecates storage()
    return (x.dtype == torch.float32 and x.device.type == "cpu" and x.is_contiguous()
            and storage().nbytes() == x.numel() * 4)


def _check_unchanged(name, held):
    """The inputs of `name` that the session holds must not have changed since they were fed: a
    model that changes a layer's input in place after the layer ran (x.relu_() on it, say)
    would otherwise calibrate on values the layer never saw."""
    for b, ref, version in held:
        x = ref()
        if x is not None and x._version != version:
            raise RuntimeError(f"layer '{name}': its input of batch {b} was changed in place "
                               "after the layer ran (torch's version counter moved); ptq.torch "
                               "calibrates on the inputs it holds until the layer's last batch: "
                               "change the model to write a new tensor, or calibrate with "
                               "activation_mode='bounded', which holds no inputs")


def _fold_balance(model, layers, session):
    """Each balanced layer's weight times 1/s along its input channels: the model then runs
    on its raw inputs (as `ptq calibrate --fake-quant-weights` writes it)."""
    for layer in layers:
        factors = session.layer(layer.name)["balance_factors"] if layer.type != "AvgPool2d" \
            else []
        if not factors:
            continue
        w = model.get_submodule(layer.name).weight
        inverse = torch.tensor(factors, dtype=torch.float32).reciprocal()  # 1.0f / s, as ptq
        with torch.no_grad():
            w.mul_(_balance_shape(layer.type, w, inverse))


def auto_calibrate(model, config, batches, evaluate, max_drop, **options):
    """The toolkit's accuracy-based automatic calibration (docs/python.md): `evaluate(model)`
    returns a metric of a model (higher is better, e.g. top-1 accuracy); a calibration is
    accepted when it loses at most `max_drop` of the metric in its fake-quant model
    (Calibration.fake_quant_model). The layers are ranked by their estimated output SQNR (the
    weight SQNR and the last batch's input SQNR the calibration measured: no extra pass), the
    least first; ptq.auto_calibrate's binary search keeps the fewest of them in float. `options`
    go to calibrate(). Returns an AutoCalibration."""
    config = _as_config(config)
    original = evaluate(model)
    runs = {}

    def run(skip):
        key = tuple(skip)
        if key not in runs:
            text = config.text() + "".join(f'skip_layers: "{n}"\n' for n in skip)
            runs[key] = calibrate(model, ptq.parse_config(text, "auto_calibrate"), batches,
                                  activation_sqnr=not skip, **options)
        return runs[key]

    first = run([])
    scores = [(l.name, ptq._ptq._combined_sqnr_db(first.session.layer(l.name)["weight_sqnr_db"],
                                                  first.activation_sqnr_db.get(l.name,
                                                                               float("nan"))))
              for l in first.layers if first.session.layer(l.name)["quant_enable"]]
    metrics = {}

    def judge(skip):
        metric = evaluate(run(skip).fake_quant_model())
        metrics[tuple(skip)] = metric
        return original - metric <= max_drop, float(metric)

    searched = ptq._ptq._auto_calibrate(scores, judge)
    return AutoCalibration(run(searched["skip_layers"]), original, searched)


class AutoCalibration:
    """What auto_calibrate found: `calibration` (with `skip_layers` in float), `skip_layers`,
    `accepted` (False: no evaluated set kept the metric, every ranked layer is in float),
    `ranking` (most sensitive first), `steps` ((skip_layers, accepted, metric) per evaluation),
    `original` (the float model's metric)."""

    def __init__(self, calibration, original, searched):
        self.calibration = calibration
        self.original = original
        self.skip_layers = searched["skip_layers"]
        self.accepted = searched["accepted"]
        self.ranking = searched["ranking"]
        self.steps = searched["steps"]
