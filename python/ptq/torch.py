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
import json
import os
import subprocess

import numpy as np
import torch

import ptq

_LAYER_TYPES = ("Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "Linear",
                "AvgPool2d")
_BATCH_NORMS = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)
_ACTIVATION_MODULES = {torch.nn.ReLU: "ReLU", torch.nn.ReLU6: "ReLU6",
                       torch.nn.Sigmoid: "Sigmoid", torch.nn.Tanh: "Tanh",
                       torch.nn.LeakyReLU: "LeakyReLU", torch.nn.PReLU: "PReLU",
                       torch.nn.GELU: "GELU", torch.nn.RReLU: "RReLU"}
_ACTIVATION_FUNCTIONS = {torch.relu: "ReLU", torch.nn.functional.relu: "ReLU",
                         torch.sigmoid: "Sigmoid", torch.tanh: "Tanh",
                         torch.nn.functional.relu6: "ReLU6"}


def _module_type(module):
    name = type(module).__name__
    return name if name in _LAYER_TYPES else None


def _activation_of(module):
    kind = _ACTIVATION_MODULES.get(type(module))
    if kind is None:
        return None
    a = {"kind": kind}
    if kind == "LeakyReLU":
        a["negative_slope"] = float(module.negative_slope)
    elif kind == "PReLU":
        a["weight"] = module.weight.detach()
    elif kind == "GELU":
        a["approximate"] = getattr(module, "approximate", "none")
    elif kind == "RReLU":
        a["lower"], a["upper"] = float(module.lower), float(module.upper)
    return a


class Layer:
    """A quantizable layer of the model: its module path, type, the BatchNorm module path fused
    into it (or None) and the activation after it (a dict, or None)."""

    def __init__(self, name, type, batch_norm=None, activation=None):
        self.name, self.type, self.batch_norm, self.activation = name, type, batch_norm, activation

    def __repr__(self):
        return (f"Layer({self.name!r}, {self.type!r}, batch_norm={self.batch_norm!r}, "
                f"activation={self.activation and self.activation['kind']!r})")


def find_layers(model):
    """The model's quantizable layers in the order its forward pass runs them, with their
    BatchNorms and activations (torch.fx; a model fx cannot trace raises its error)."""
    graph = torch.fx.symbolic_trace(model).graph
    modules = dict(model.named_modules())
    layers, by_node = [], {}

    def only_use(node):
        users = list(node.users)
        return users[0] if len(users) == 1 else None

    def activation_after(node):
        use = only_use(node)
        if use is None:
            return None
        if use.op == "call_module":
            a = _activation_of(modules[use.target])
            if a is not None:
                a["module"] = use.target
            return a
        if use.op == "call_function" and use.target in _ACTIVATION_FUNCTIONS:
            return {"kind": _ACTIVATION_FUNCTIONS[use.target]}
        return None

    for node in graph.nodes:
        if node.op != "call_module":
            continue
        kind = _module_type(modules[node.target])
        if kind is None or node.target in by_node:
            continue
        layer = Layer(node.target, kind)
        tail = node
        use = only_use(node)
        if kind.startswith("Conv") and not kind.startswith("ConvTranspose") and use is not None \
                and use.op == "call_module" and isinstance(modules[use.target], _BATCH_NORMS):
            layer.batch_norm = use.target
            tail = use
        if kind != "AvgPool2d":
            layer.activation = activation_after(tail)
        by_node[node.target] = layer
        layers.append(layer)
    return layers


def _tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _layer_dict(layer, module, batch_norm):
    d = {"name": layer.name, "type": layer.type}
    if layer.type == "AvgPool2d":
        return d
    w = module.weight.detach()
    d["weight"] = w
    if w.dtype == torch.float32 and w.is_contiguous():
        d["weight_out"] = w  # quantized where it lies, in the calibrated model's own parameter
    if module.bias is not None:
        d["bias"] = module.bias.detach()
    if layer.type != "Linear":
        d.update(stride=list(_tuple(module.stride)), padding=list(_tuple(module.padding)),
                 dilation=list(_tuple(module.dilation)), groups=int(module.groups),
                 padding_mode=module.padding_mode)
        if layer.type.startswith("ConvTranspose"):
            d["output_padding"] = list(_tuple(module.output_padding))
    if batch_norm is not None:
        d["batch_norm"] = {"weight": batch_norm.weight.detach(), "bias": batch_norm.bias.detach(),
                           "running_mean": batch_norm.running_mean,
                           "running_var": batch_norm.running_var, "eps": float(batch_norm.eps)}
    if layer.activation is not None:
        d["activation"] = layer.activation
    return d


def _set_submodule(model, path, new):
    parent, _, leaf = path.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, leaf, new)


def _balance_shape(layer_type, weight, factors):
    """Per input channel values (a tensor) shaped to multiply `weight` (native layout)."""
    f = factors.to(weight.dtype)
    if layer_type == "Linear":
        return f.reshape(1, -1)
    if layer_type.startswith("ConvTranspose"):
        return f.reshape([-1] + [1] * (weight.dim() - 1))
    cout, cin_g = weight.shape[0], weight.shape[1]
    groups = f.numel() // cin_g
    per_group = f.reshape(groups, 1, cin_g).expand(groups, cout // groups, cin_g)
    return per_group.reshape([cout, cin_g] + [1] * (weight.dim() - 2))


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


def _balance_input_shape(layer_type, module):
    """How the factors broadcast over the layer's input: the last axis for Linear, axis 1
    otherwise."""
    if layer_type == "Linear":
        return (-1,)
    return (1, -1) + (1,) * (module.weight.dim() - 2)


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


def _write_model_files(folder, model, layers):
    """manifest.json and weights.safetensors of `model` (its float state_dict): what
    `ptq calibrate --model --weights` and `ptq export --model` read."""
    state = {k: v for k, v in model.state_dict().items() if v.is_floating_point()}
    ptq._ptq._write_safetensors(os.path.join(folder, "weights.safetensors"),
                                list(state.items()))
    modules = dict(model.named_modules())
    entries = []
    for layer in layers:
        m = modules[layer.name]
        e = {"name": layer.name, "type": layer.type}
        if layer.type == "AvgPool2d":
            e["kernel_size"] = list(_tuple(m.kernel_size))
            e["stride"] = list(_tuple(m.stride))
        else:
            e["weight"] = layer.name + ".weight"
            if m.bias is not None:
                e["bias"] = layer.name + ".bias"
            if layer.type != "Linear":
                e.update(stride=list(_tuple(m.stride)), padding=list(_tuple(m.padding)),
                         dilation=list(_tuple(m.dilation)), groups=int(m.groups))
                if m.padding_mode != "zeros":
                    e["padding_mode"] = m.padding_mode
                if layer.type.startswith("ConvTranspose"):
                    e["output_padding"] = list(_tuple(m.output_padding))
            if layer.batch_norm is not None:
                bn = modules[layer.batch_norm]
                e["batch_norm"] = {k: f"{layer.batch_norm}.{k}" for k in
                                   ("weight", "bias", "running_mean", "running_var")}
                e["batch_norm"]["eps"] = float(bn.eps)
            if layer.activation is not None:
                a = {k: v for k, v in layer.activation.items() if k not in ("kind", "module")}
                a["type"] = layer.activation["kind"]
                if "weight" in a:  # a PReLU's: its parameter's state_dict name
                    a["weight"] = layer.activation["module"] + ".weight"
                e["activation"] = a if len(a) > 1 else a["type"]
        entries.append(e)
    with open(os.path.join(folder, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump({"layers": entries}, f, indent=2)


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
    for p in range(session.activation_passes):
        for b, batch in enumerate(batches):
            def feed(name, x, b=b, first=p == 0):
                if name in enabled:
                    session.feed(name, x)
                    if first:
                        saved.add(f"batch{b}", name, x)
                        if last is not None and b + 1 == len(batches):
                            last[name] = x.detach().clone()
            hooks.on_input = feed
            try:
                _forward(model, batch)
            finally:
                hooks.on_input = None


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


def _fake_quantize(x, a):
    """x quantize-dequantized on the activation grid `a` (scale, offset, bits), in float32."""
    qmin, qmax = -(1 << (a["bits"] - 1)), (1 << (a["bits"] - 1)) - 1
    scale = torch.tensor(a["scale"], dtype=torch.float32)
    q = torch.clamp(torch.round(x / scale) + a["offset"], qmin, qmax) - a["offset"]
    return q * scale


def _input_quantizer(layer, module, info):
    """A pre-hook quantizing a layer's input as the record says (the DMQ-divided input; the
    model's weights are folded, so the quantized input is multiplied back by the factors)."""
    a = info["activation"]
    factors = info["balance_factors"]
    shape = _balance_input_shape(layer.type, module) if layer.type != "AvgPool2d" else None
    s = torch.tensor(factors, dtype=torch.float32).reshape(shape) if factors else None

    def hook(_module, args):
        x = args[0]
        if s is None:
            return (_fake_quantize(x, a),) + tuple(args[1:])
        return (_fake_quantize(x / s, a) * s,) + tuple(args[1:])
    return hook


def _input_sqnr(x, info):
    """SQNR (dB) of a layer's input (divided by its DMQ factors) quantize-dequantized."""
    x = x.float()
    if info["balance_factors"]:
        shape = (-1,) if info["type"] == "Linear" else (1, -1) + (1,) * (x.dim() - 2)
        x = x / torch.tensor(info["balance_factors"], dtype=torch.float32).reshape(shape)
    noise = (x - _fake_quantize(x, info["activation"])).double().pow(2).sum().item()
    signal = x.double().pow(2).sum().item()
    if noise == 0.0:
        return float("inf")
    return 10.0 * np.log10(signal / noise) if signal > 0 else float("-inf")


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
