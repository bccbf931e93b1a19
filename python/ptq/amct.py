"""ptq.amct: the toolkit's PyTorch PTQ API with ptq's numbers: same names, same arguments,
same files (docs/python.md, "From the toolkit"). A script written for the toolkit runs with

    import ptq.amct as amct

in place of `import amct_pytorch as amct`:

    amct.create_quant_config(config_file, model, input_data, skip_layers=None, batch_num=1,
                             activation_offset=True, config_defination=None)
    calib = amct.quantize_preprocess(config_file, record_file, model, input_data)  # DMQ only
    calib(*input_data)                                # the DMQ factors come from one batch
    calib = amct.quantize_model(config_file, modfied_onnx_file, record_file, model, input_data)
    for batch in batches[:batch_num]: calib(batch)    # the record is written after the last
    amct.save_model(modfied_onnx_file, record_file, save_path)  # fake-quant and deploy ONNX

The record file is the toolkit's, byte for byte as `ptq calibrate` writes it. What differs from
the toolkit is listed in docs/python.md.
"""
import copy
import os
import re

import numpy as np
import torch

import ptq
from ptq import torch as _pt
from ptq._torch_fake_quant import _input_quantizer, _input_sqnr
from ptq._torch_layers import _layer_dict, find_layers


def _tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _layer_infos(model):
    """The model's quantizable layers as the config's resolution takes them."""
    infos = []
    modules = dict(model.named_modules())
    for layer in find_layers(model):
        m = modules[layer.name]
        info = {"name": layer.name, "type": layer.type}
        if layer.type != "AvgPool2d":
            info["bias"] = m.bias is not None
            w = m.weight
            if layer.type.startswith("ConvTranspose"):
                info["in_channels"], info["out_channels"] = w.shape[0], w.shape[1] * m.groups
            elif layer.type == "Linear":
                info["in_channels"], info["out_channels"] = w.shape[1], w.shape[0]
            else:
                info["in_channels"], info["out_channels"] = w.shape[1] * m.groups, w.shape[0]
            info["groups"] = int(getattr(m, "groups", 1))
        infos.append(info)
    return infos


def create_quant_config(config_file, model, input_data, skip_layers=None, batch_num=1,
                        activation_offset=True, config_defination=None):
    """Writes the detailed JSON config of `model`'s quantizable layers to `config_file` (the
    toolkit's, byte for byte): from the simple config `config_defination` when given (then
    `skip_layers`, `batch_num` and `activation_offset` are ignored, as the toolkit ignores
    them), else from those three. `input_data` is not needed (the layers come from torch.fx)."""
    del input_data
    if not isinstance(model, torch.nn.Module):
        raise TypeError("model must be a torch.nn.Module")
    if config_defination is not None:
        config = ptq.read_config(config_defination)
    else:
        if not isinstance(batch_num, int) or isinstance(batch_num, bool):
            raise TypeError("batch_num must be an int")
        text = f"batch_num: {batch_num}\nactivation_offset: {str(bool(activation_offset)).lower()}\n"
        for name in skip_layers or []:
            text += f'skip_layers: "{name}"\n'
        config = ptq.parse_config(text, "create_quant_config")
    plan = config.resolve(_layer_infos(model))
    _write(config_file, plan.toolkit_json())


def _write(path, text):
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _read_plan(config_file):
    with open(config_file, encoding="utf-8") as f:
        return ptq.read_quant_config(f.read())


def _record_factors(record_file):
    """{layer: tensor_balance_factor} of a record quantize_preprocess wrote."""
    if not os.path.exists(record_file) or os.path.getsize(record_file) == 0:
        return {}
    with open(record_file, encoding="utf-8") as f:
        text = f.read()
    factors, key = {}, None
    for line in text.splitlines():
        m = re.match(r'\s*key:\s*"(.*)"', line)
        if m:
            key = m.group(1)
            continue
        m = re.match(r"\s*tensor_balance_factor:\s*(\S+)", line)
        if m and key is not None:
            factors.setdefault(key, []).append(float(np.float32(m.group(1))))
    return factors


class _CalibrationModel(torch.nn.Module):
    """What quantize_preprocess and quantize_model return: the fused model (the toolkit's copy,
    the user's model untouched), which the user runs; each forward pass feeds the session."""

    def __init__(self, model, on_forward, session=None, layers=None, last_inputs=None):
        super().__init__()
        self.model = model
        self._on_forward = on_forward
        self._session, self._layers = session, layers
        self._last = last_inputs if last_inputs is not None else {}

    def forward(self, *args, **kwargs):
        return self._on_forward(*args, **kwargs)

    def fake_quant_model(self):
        """After calibration: the fused model with fake-quantized weights (folded back from the
        DMQ balance) and every quantized layer's input quantize-dequantized: what
        accuracy_based_auto_calibration evaluates."""
        fq = copy.deepcopy(self.model)
        for m in fq.modules():
            m._forward_pre_hooks.clear()
        _pt._fold_balance(fq, self._layers, self._session)
        for layer in self._layers:
            info = self._session.layer(layer.name)
            if info["quant_enable"]:
                module = fq.get_submodule(layer.name)
                module.register_forward_pre_hook(_input_quantizer(layer, module, info))
        return fq

    def sensitivity(self):
        """{layer: estimated output SQNR in dB} from the weight SQNR and the last batch's input
        SQNR: the statistics of the calibration, no extra pass."""
        out = {}
        for name, x in self._last.items():
            info = self._session.layer(name)
            out[name] = ptq._ptq._combined_sqnr_db(info["weight_sqnr_db"],
                                                   _input_sqnr(x, info))
        return out


def _session(plan, model, threads=1):
    """A session over `model` (a copy, eval) from the detailed config, its fusions applied."""
    layers = find_layers(model)
    modules = dict(model.named_modules())
    descs = [_layer_dict(l, modules[l.name], modules[l.batch_norm] if l.batch_norm else None)
             for l in layers]
    session = ptq.Session(plan, descs, threads=threads)
    _pt._adopt_fusions(model, layers, session)
    return session, layers


def quantize_preprocess(config_file, record_file, model, input_data):
    """The DMQ pass: returns the calibration model; its first forward pass computes every DMQ
    layer's factors (from that one batch, as the toolkit keeps them) and writes them to
    `record_file`, which is created empty here."""
    plan = _read_plan(config_file)
    if not any(l["dmq_balancer_param"] is not None for l in plan.layers if l["quant_enable"]):
        raise ValueError("quantize_preprocess: no layer of the config has dmq_balancer_param")
    _write(record_file, "")
    fused = copy.deepcopy(model).eval()
    session, layers = _session(plan, fused)
    hooks = _pt._Inputs(fused, layers)
    state = {"done": False}

    def forward(*args, **kwargs):
        if state["done"]:
            with torch.no_grad():
                return fused(*args, **kwargs)
        wanted = {n: None for n in session.dmq_layers()}

        def keep(name, x):
            if name in wanted and wanted[name] is None:
                wanted[name] = x.detach()
        hooks.on_input = keep
        try:
            with torch.no_grad():
                out = fused(*args, **kwargs)
        finally:
            hooks.on_input = None
        entries = []
        for name, x in wanted.items():
            session.feed_dmq(name, x)
            entries.append((name, {"tensor_balance_factor":
                                   session.layer(name)["balance_factors"]}))
        _write(record_file, ptq._ptq._make_record(entries).text())
        state["done"] = True
        return out
    return _CalibrationModel(fused, forward)


def quantize_model(config_file, modfied_onnx_file, record_file, model, input_data,
                   input_names=None, output_names=None, dynamic_axes=None):
    """Quantizes the weights (ARQ; AdaRound on `input_data`), writes their scales to
    `record_file` and the fused model with fake-quantized weights to `modfied_onnx_file`, and
    returns the calibration model: run it batch_num times; after the last batch of the last
    layer, `record_file` holds the whole record."""
    plan = _read_plan(config_file)
    fused = copy.deepcopy(model).eval()
    session, layers = _session(plan, fused)
    if session.dmq_layers():
        factors = _record_factors(record_file)
        for name in session.dmq_layers():
            if name not in factors:
                raise RuntimeError("config_file indicates dmq_balancer, but record_file is empty "
                                   f"or has no factors of layer '{name}': run "
                                   "quantize_preprocess's model once first")
            session.feed_dmq_factors(name, factors[name])
    session.quantize_weights()
    hooks = _pt._Inputs(fused, layers)
    _pt._use_working_weights(fused, layers, session, hooks)
    _pt._ada_phase(fused, layers, session, hooks, input_data, _pt._Saved(None))
    entries = []
    for l in layers:
        info = session.layer(l.name)
        if not info["quant_enable"]:
            continue
        e = {"scale_w": info["scale_w"], "offset_w": info["offset_w"]}
        if info["balance_factors"]:
            e["tensor_balance_factor"] = info["balance_factors"]
        entries.append((l.name, e))
    _write(record_file, ptq._ptq._make_record(entries).text())
    os.makedirs(os.path.dirname(os.path.abspath(modfied_onnx_file)), exist_ok=True)
    divide, hooks.divide = hooks.divide, {}  # the toolkit's modified model divides nothing yet
    try:
        with torch.no_grad():
            # A BatchNorm the config did not fuse stays a node (PRESERVE on an eval model), and
            # every weight keeps its state_dict name (no constant folding): save_model finds
            # each layer's node by it.
            torch.onnx.export(fused, _tuple(input_data), modfied_onnx_file, opset_version=13,
                              training=torch.onnx.TrainingMode.PRESERVE,
                              do_constant_folding=False, input_names=input_names,
                              output_names=output_names, dynamic_axes=dynamic_axes)
    finally:
        hooks.divide = divide
    state = {"written": False}
    last = {}

    def forward(*args, **kwargs):
        def feed(name, x):
            if session.layer(name)["quant_enable"] and not state["written"] and \
                    name in session.pending():
                session.feed(name, x)
                last[name] = x.detach().clone()
        hooks.on_input = feed
        try:
            with torch.no_grad():
                out = fused(*args, **kwargs)
        finally:
            hooks.on_input = None
        if not state["written"] and not session.pending():
            _write(record_file, session.record().text())
            state["written"] = True
        return out
    return _CalibrationModel(fused, forward, session, layers, last)


def save_model(modfied_onnx_file, record_file, save_path):
    """Writes `<save_path>_fake_quant_model.onnx` and `<save_path>_deploy_model.onnx` from the
    modified model and the record (docs/python.md: the operators and numbers of each)."""
    from . import _amct_onnx
    with open(record_file, encoding="utf-8") as f:
        text = f.read()
    if not text.strip():
        raise RuntimeError("record_file is empty, no layers to be quantized: run the model "
                           "quantize_model returned batch_num times first")
    _amct_onnx.save(modfied_onnx_file, ptq.parse_record(text), save_path)


def accuracy_based_auto_calibration(model, model_evaluator, config_file, record_file, save_dir,
                                    input_data, input_names=None, output_names=None,
                                    dynamic_axes=None, strategy="BinarySearch",
                                    sensitivity="CosineSimilarity"):
    """The toolkit's accuracy-based automatic calibration with ptq's search (docs/python.md):
    `model_evaluator` has the toolkit's AutoCalibrationEvaluatorBase methods: calibration(model)
    runs batch_num batches, evaluate(model) gives a metric, metric_eval(original, new) gives
    (satisfied, loss). A config with DMQ takes its factors from one quantize_preprocess run
    (evaluator.calibration of its model). Every layer quantized first; if metric_eval refuses it,
    the binary search keeps the fewest most sensitive layers in float (config_file is rewritten
    with their quant_enable false, as the toolkit does). The layers are ranked by the SQNR the calibration
    measured (`sensitivity` is accepted for the toolkit's sake; docs/python.md says why no
    cosine pass runs). Writes the record, the two models of save_model, and beside save_dir the
    ranking (accuracy_based_auto_calibration_ranking_information.json) and the final config
    (accuracy_based_auto_calibration_final_config.json); ./amct_log/ gets the evaluations."""
    import json
    if strategy != "BinarySearch":
        raise RuntimeError("strategy must be 'BinarySearch'")
    if sensitivity not in ("CosineSimilarity", "MseSimilarity"):
        raise RuntimeError("sensitivity must be 'CosineSimilarity' or 'MseSimilarity'")
    with open(config_file, encoding="utf-8") as f:
        base = json.load(f)
    original = model_evaluator.evaluate(model)
    if not model_evaluator.metric_eval(original, original)[0]:
        raise ValueError("Compare between original_accuracy and original_accuracy can not satisfy "
                         "the requirement: check metric_eval")
    folder = os.path.dirname(os.path.abspath(save_dir))
    os.makedirs(folder, exist_ok=True)
    modified = os.path.join(folder, "modified_model.onnx")
    history, sqnr = [], {}
    factors = ""  # a DMQ config: the factors of one preprocess run, given to every calibration
    if any(isinstance(v, dict) and "dmq_balancer_param" in v for v in base.values()):
        model_evaluator.calibration(quantize_preprocess(config_file, record_file, model,
                                                        input_data))
        with open(record_file, encoding="utf-8") as f:
            factors = f.read()

    def calibrate(skip):
        cfg = json.loads(json.dumps(base))
        for name in skip:
            cfg[name]["quant_enable"] = False
        _write(config_file, json.dumps(cfg, indent=4))
        if factors:
            _write(record_file, factors)
        calib = quantize_model(config_file, modified, record_file, model, input_data,
                               input_names, output_names, dynamic_axes)
        model_evaluator.calibration(calib)
        save_model(modified, record_file, save_dir)
        return calib

    def judge(skip):
        calib = calibrate(skip)
        metric = model_evaluator.evaluate(calib.fake_quant_model())
        ok, loss = model_evaluator.metric_eval(original, metric)
        history.append({"roll_back_config": {n: True for n in skip}, "metric_eval": [ok, loss]})
        if not skip:
            sqnr.update(calib.sensitivity())
        return bool(ok), float(loss)

    ok, _ = judge([])
    scores = sorted(sqnr.items())
    if ok:
        searched = {"skip_layers": [], "accepted": True, "ranking": [n for n, _ in scores]}
    else:
        first = [True]

        def again(skip):
            if not skip and first[0]:  # every layer quantized was just evaluated: refused
                first[0] = False
                return False, float(history[0]["metric_eval"][1])
            return judge(skip)
        searched = ptq._ptq._auto_calibrate(scores, again)
        calibrate(searched["skip_layers"])  # the files of the final set
    ranking = sorted(scores, key=lambda e: e[1])
    _write(os.path.join(folder, "accuracy_based_auto_calibration_ranking_information.json"),
           json.dumps([[n, v] for n, v in ranking]))
    with open(config_file, encoding="utf-8") as f:
        final = f.read()
    _write(os.path.join(folder, "accuracy_based_auto_calibration_final_config.json"), final)
    _write(os.path.join("amct_log", "accuracy_based_auto_calibration_record.json"),
           "".join(json.dumps(h) for h in history))
    return searched
