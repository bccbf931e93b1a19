"""The toolkit's two models from the modified ONNX and the record (ptq.amct.save_model):

- `<save_path>_deploy_model.onnx`: before each quantized layer an AscendQuant (scale = 1/scale_d,
  offset = offset_d, dst_type), after it an AscendDequant with the packed uint64 parameter
  `(uint8(offset_w) << 32) + bits(float32(scale_d * scale_w))` (s19-truncated under
  FORCE_FP16_QUANT), int8 weights, int32 bias `rint(bias / (scale_w * scale_d))`, a Mul by 1/b
  before a DMQ layer; Gemm weights transposed offline (transB 0). The custom operators have the
  empty domain, as the toolkit writes them.
- `<save_path>_fake_quant_model.onnx`: the same in standard operators: Mul(1/scale_d), Round,
  Add(offset), Clip, Sub(offset) for the quantization, the integer weights and bias as floats,
  Mul(scale_d * scale_w) after the layer.

float32 arithmetic throughout (numpy float32), as the toolkit's numpy code and ptq's
`amct-deploy` export compute the same numbers.
"""
import os

import numpy as np
import onnx
from onnx import helper, numpy_helper

_LAYER_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul", "AveragePool")


def _bits(t, default=8):
    return int(t[3:]) if t and t.startswith("INT") else default


def _find_node(graph, layer):
    """The node of `layer` (a module path): the one reading `<layer>.weight`, or for a pooling
    layer the one torch named `/.../<layer>/AveragePool`."""
    for i, n in enumerate(graph.node):
        if n.op_type in _LAYER_OPS and (layer + ".weight" in n.input or
                                        n.name.endswith("/" + layer + "/" + n.op_type)):
            return i
    raise ValueError(f"save_model: no node of layer '{layer}' in the modified ONNX model")


def _initializer(graph, name):
    for t in graph.initializer:
        if t.name == name:
            return t
    return None


def _replace_initializer(graph, name, array):
    for i, t in enumerate(graph.initializer):
        if t.name == name:
            graph.initializer[i].CopyFrom(numpy_helper.from_array(array, name))
            return
    graph.initializer.append(numpy_helper.from_array(array, name))


def _channel_scales(op, weight, scales, groups):
    """scale_w per element of `weight` (native layout), as ARQ's output channels are laid out."""
    s = np.asarray(scales, dtype=np.float32)
    if s.size == 1:
        return np.broadcast_to(s.reshape([1] * weight.ndim), weight.shape)
    if op == "ConvTranspose":  # [Cin, Cout/g, k...]: channel gi * (Cout/g) + j
        cin, per = weight.shape[0], weight.shape[1]
        rows = np.arange(cin) // (cin // groups)
        idx = rows[:, None] * per + np.arange(per)[None, :]
        return s[idx].reshape(idx.shape + (1,) * (weight.ndim - 2))
    return s.reshape([-1] + [1] * (weight.ndim - 1))


def _attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


class _Layer:
    """One layer's numbers, from its record entry."""

    def __init__(self, name, entry):
        self.name = name
        self.scale_d = np.float32(entry["scale_d"])
        self.offset_d = int(entry["offset_d"])
        self.act_bits = _bits(entry["act_type"])
        self.wts_bits = _bits(entry["wts_type"])
        self.scale_w = np.asarray(entry["scale_w"] or [1.0], dtype=np.float32)
        self.offset_w = np.asarray(entry["offset_w"] or [0], dtype=np.int64)
        self.factors = np.asarray(entry["tensor_balance_factor"], dtype=np.float32)
        self.fp16 = entry["fakequant_precision_mode"] == "FORCE_FP16_QUANT"

    def dequant_scale(self):
        s = (self.scale_d * self.scale_w).astype(np.float32)
        if self.fp16:  # cast_to_s19: the low 13 mantissa bits cleared
            s = (s.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
        return s

    def dequant_param(self):
        low = self.dequant_scale().view(np.uint32).astype(np.uint64)
        return (self.offset_w.astype(np.uint8).astype(np.uint64) << np.uint64(32)) + low


class _Edit:
    """Nodes to put before and after node `i`, and the renames, applied in one pass."""

    def __init__(self, graph):
        self.graph = graph
        self.before, self.after = {}, {}

    def add_before(self, i, nodes):
        self.before.setdefault(i, []).extend(nodes)

    def add_after(self, i, nodes):
        self.after.setdefault(i, []).extend(nodes)

    def finish(self):
        nodes = []
        for i, n in enumerate(self.graph.node):
            nodes += self.before.get(i, [])
            nodes.append(n)
            nodes += self.after.get(i, [])
        del self.graph.node[:]
        self.graph.node.extend(nodes)


def _const(graph, name, array):
    graph.initializer.append(numpy_helper.from_array(np.asarray(array), name))
    return name


def _quantized_weights(graph, node, layer):
    """The layer's weight codes and int32 bias (float32 arithmetic), Gemm transposed."""
    w_name = node.input[1] if len(node.input) > 1 else None
    if w_name is None or _initializer(graph, w_name) is None:
        return None, None, None
    w = numpy_helper.to_array(_initializer(graph, w_name)).astype(np.float32)
    groups = int(_attr(node, "group", 1))
    per = _channel_scales(node.op_type, w, layer.scale_w, groups)
    lo, hi = -(1 << (layer.wts_bits - 1)), (1 << (layer.wts_bits - 1)) - 1
    codes = np.clip(np.rint(w / per), lo, hi)
    bias = None
    if len(node.input) > 2 and node.input[2] and _initializer(graph, node.input[2]) is not None:
        b = numpy_helper.to_array(_initializer(graph, node.input[2])).astype(np.float32)
        ws = layer.scale_w if layer.scale_w.size > 1 else np.full(b.shape, layer.scale_w[0],
                                                                  np.float32)
        q = np.rint(b / (ws * layer.scale_d).astype(np.float32))
        if np.any(q < -2147483648.0) or np.any(q >= 2147483648.0):
            raise RuntimeError(f"layer '{layer.name}': Do bias quantize failed: its int32 bias "
                               "overflows; add it to skip_layers")
        bias = q
    if node.op_type == "Gemm" and int(_attr(node, "transB", 0)) == 1:
        codes = codes.T.copy()
        for a in node.attribute:
            if a.name == "transB":
                a.i = 0
    return w_name, codes, bias


def _quant_input(graph, node_index):
    """Where the quantization goes: the layer's input, or before its Pad (a padded pool)."""
    node = graph.node[node_index]
    for j in range(node_index - 1, -1, -1):
        p = graph.node[j]
        if p.op_type == "Pad" and p.output[0] == node.input[0]:
            return j, p
    return node_index, node


def _rank_shape(node, graph, rank_default):
    w = _initializer(graph, node.input[1]) if len(node.input) > 1 else None
    return len(w.dims) if w is not None else rank_default


def _edit_layer(graph, edit, i, layer, deploy):
    node = graph.node[i]
    at, first = _quant_input(graph, i)
    x = first.input[0]
    name = layer.name
    rank = 2 if node.op_type in ("Gemm", "MatMul") else _rank_shape(node, graph, 4)
    column = [1, -1] + [1] * (rank - 2)
    pre = []
    if layer.factors.size:
        inv = (np.float32(1.0) / layer.factors).astype(np.float32).reshape(column)
        pre.append(helper.make_node("Mul", [x, _const(graph, name + ".mul.factor", inv)],
                                    [name + ".mul_output"], name + ".mul"))
        x = name + ".mul_output"
    qmin, qmax = -(1 << (layer.act_bits - 1)), (1 << (layer.act_bits - 1)) - 1
    quant_scale = np.float32(1.0) / layer.scale_d
    if deploy:
        pre.append(helper.make_node("AscendQuant", [x], [name + ".quant_output"], name + ".quant",
                                    scale=float(quant_scale), offset=float(layer.offset_d),
                                    dst_type=f"INT{layer.act_bits}"))
    else:
        f = name + ".quant.fakequant"
        c = lambda tag, v: _const(graph, f"{f}.{tag}", np.float32(v))  # noqa: E731
        pre += [helper.make_node("Mul", [x, c("scale", quant_scale)], [f + ".mul_out"], f + ".mul"),
                helper.make_node("Round", [f + ".mul_out"], [f + ".round_out"], f + ".round"),
                helper.make_node("Add", [f + ".round_out", c("offset", layer.offset_d)],
                                 [f + ".add_out"], f + ".add"),
                helper.make_node("Clip", [f + ".add_out", c("min_val", qmin), c("max_val", qmax)],
                                 [f + ".clip_out"], f + ".clip"),
                helper.make_node("Sub", [f + ".clip_out", f + ".offset"],
                                 [name + ".quant_output"], f + ".sub")]
    first.input[0] = name + ".quant_output"
    edit.add_before(at, pre)
    if node.op_type != "AveragePool":
        w_name, codes, bias = _quantized_weights(graph, node, layer)
        if w_name is not None:
            _replace_initializer(graph, w_name,
                                 codes.astype(np.int8 if deploy else np.float32))
            if bias is not None:
                _replace_initializer(graph, node.input[2],
                                     bias.astype(np.int32 if deploy else np.float32))
    y = node.output[0]
    node.output[0] = name + "_output0"
    if deploy:
        param = _const(graph, name + ".dequant.param", layer.dequant_param())
        post = [helper.make_node("AscendDequant", [name + "_output0", param], [y],
                                 name + ".dequant", dtype=0)]
    else:
        scale = layer.dequant_scale().reshape(column if layer.scale_w.size > 1 else [1])
        post = [helper.make_node("Mul", [name + "_output0",
                                         _const(graph, name + ".fakedequant.scale", scale)],
                                 [y], name + ".fakedequant.mul")]
    edit.add_after(i, post)


def _model(modified, record, deploy):
    model = onnx.ModelProto()
    model.CopyFrom(modified)
    graph = model.graph
    edit = _Edit(graph)
    for name, entry in record.layers.items():
        _edit_layer(graph, edit, _find_node(graph, name), _Layer(name, entry), deploy)
    edit.finish()
    return model


def file_names(save_path):
    """The toolkit's names: `<save_path>_deploy_model.onnx` and `..._fake_quant_model.onnx`,
    or `deploy_model.onnx` and `fake_quant_model.onnx` in a save_path ending in '/'."""
    folder, prefix = os.path.split(save_path)
    stem = prefix + "_" if prefix else ""
    return (os.path.join(folder, stem + "deploy_model.onnx"),
            os.path.join(folder, stem + "fake_quant_model.onnx"))


def save(modified_path, record, save_path):
    modified = onnx.load(modified_path)
    deploy_path, fake_path = file_names(save_path)
    folder = os.path.dirname(deploy_path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    for path, deploy in ((deploy_path, True), (fake_path, False)):
        tmp = path + ".tmp"
        onnx.save(_model(modified, record, deploy), tmp)
        os.replace(tmp, path)
    return deploy_path, fake_path
