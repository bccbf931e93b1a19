"""The layers of a torch.nn.Module as ptq sees them (used by ptq.torch and ptq.amct): which
modules are quantized layers, their BatchNorms and activations (found with torch.fx), the layer
descriptions the session takes, and the manifest and weights files `ptq calibrate` and
`ptq export` read for the same model."""
import json
import os

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
