"""What an engine's own converter does with ptq's table and the calibrated graph (the float
model `ptq export --format onnx` writes): quantize-dequantize every activation tensor the table
keys, with its scale and zero point, for every reader of the tensor, and quantize each keyed
weight initializer with its scales. Written with python3-onnx only, so the ort_* tests check
that the table's names and numbers fit the graph, as a TensorRT or ncnn build would need."""
import json

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as nh


def apply_table(model, table_path):
    with open(table_path) as f:
        table = json.load(f)
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    readers = {}
    for n in g.node:
        for k, x in enumerate(n.input):
            readers.setdefault(x, []).append((n, k))
    new_nodes = []
    for layer in table["layers"]:
        a = layer["activation"]
        t = a["tensor"]
        dtype = np.uint8 if a["dtype"] == "uint8" else np.int8
        s, z = t + "_engine_scale", t + "_engine_zp"
        g.initializer.extend([nh.from_array(np.float32(a["scale"]), s),
                              nh.from_array(dtype(a["zero_point"]), z)])
        q, dq = t + "_engine_q", t + "_engine_dq"
        for n, k in readers.get(t, []):
            n.input[k] = dq
        new_nodes += [oh.make_node("QuantizeLinear", [t, s, z], [q]),
                      oh.make_node("DequantizeLinear", [q, s, z], [dq])]
        w = layer.get("weight")
        if w is None:
            continue
        wt = inits[w["tensor"]]
        values = nh.to_array(wt).astype(np.float32)
        scales = np.asarray(w["scales"], np.float32)
        axis = w["axis"]
        if len(scales) > 1:  # per channel along the table's axis (Conv, Gemm transB=1: 0)
            shape = [1] * values.ndim
            shape[axis] = len(scales)
            step = scales.reshape(shape)
        else:
            step = scales[0]
        codes = np.clip(np.rint(values / step), w["qmin"], w["qmax"]).astype(np.int8)
        ws, wz, wq = w["tensor"] + "_engine_scale", w["tensor"] + "_engine_zp", w["tensor"] + "_q"
        g.initializer.extend([nh.from_array(codes, wq), nh.from_array(scales if len(scales) > 1
                                                                       else scales[0], ws),
                              nh.from_array(np.zeros(scales.shape if len(scales) > 1 else (),
                                                     np.int8), wz)])
        wdq = w["tensor"] + "_engine_dq"
        for n, k in readers.get(w["tensor"], []):
            n.input[k] = wdq
        attrs = {"axis": axis} if len(scales) > 1 else {}
        new_nodes.append(oh.make_node("DequantizeLinear", [wq, ws, wz], [wdq], **attrs))
    nodes = new_nodes + list(g.node)  # the Q/DQ first, then a topological sort
    del g.node[:]
    g.node.extend(topological(nodes, {i.name for i in g.input} | set(inits) |
                              {t.name for t in g.initializer}))
    return model


def topological(nodes, available):
    done, out, pending = set(available), [], list(nodes)
    while pending:
        rest = []
        for n in pending:
            if all(not x or x in done for x in n.input):
                out.append(n)
                done.update(n.output)
            else:
                rest.append(n)
        if len(rest) == len(pending):
            raise RuntimeError("the graph has a cycle")
        pending = rest
    return out
