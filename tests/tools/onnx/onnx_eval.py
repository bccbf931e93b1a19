"""A small NumPy evaluator for the ONNX graphs ptq writes and reads (python3-onnx 1.12 has no
onnx.reference). float32 throughout, as the models are; QuantizeLinear divides and rounds half
to even (numpy.rint), as the ONNX spec and ptq's kernels do.

Ops: Conv, BatchNormalization, Relu, AveragePool, MaxPool, Flatten, Gemm, MatMul, Add, Mul, Div,
Clip, Identity, QuantizeLinear, DequantizeLinear. Anything else is an error naming the node.
"""
import numpy as np
import onnx
import onnx.numpy_helper


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _per_axis(v, x, axis):
    """v (scalar or 1-D of len x.shape[axis]) shaped to broadcast along `axis` of x."""
    v = np.asarray(v)
    if v.ndim == 0:
        return v
    shape = [1] * x.ndim
    shape[axis % x.ndim] = v.size
    return v.reshape(shape)


def quantize_linear(x, scale, zp, axis=1):
    zp = np.asarray(zp)
    info = np.iinfo(zp.dtype)
    s = _per_axis(np.asarray(scale, np.float32), x, axis)
    z = _per_axis(zp.astype(np.float32), x, axis)
    q = np.rint(np.asarray(x, np.float32) / s) + z
    return np.clip(q, info.min, info.max).astype(zp.dtype)


def dequantize_linear(q, scale, zp, axis=1):
    s = _per_axis(np.asarray(scale, np.float32), q, axis)
    z = _per_axis(np.asarray(zp).astype(np.int32), q, axis)
    return ((q.astype(np.int32) - z).astype(np.float32) * s).astype(np.float32)


def _windows(x, kernel, strides, pads, dilations):
    """x [N,C,H,W] -> [N,C,kh,kw,OH,OW] (zero padding)."""
    n, c, h, w = x.shape
    kh, kw = kernel
    sh, sw = strides
    dh, dw = dilations
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pads[1] + pads[3] - dw * (kw - 1) - 1) // sw + 1
    out = np.empty((n, c, kh, kw, oh, ow), np.float32)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i, j] = xp[:, :, i * dh:i * dh + sh * oh:sh, j * dw:j * dw + sw * ow:sw]
    return out


def conv2d(x, w, b, a):
    if x.ndim != 4:
        raise ValueError("Conv: only 2-D convolutions are supported")
    g = a.get("group", 1)
    kernel = w.shape[2:]
    cols = _windows(x, kernel, a.get("strides", [1, 1]), a.get("pads", [0, 0, 0, 0]),
                    a.get("dilations", [1, 1]))
    n, c, kh, kw, oh, ow = cols.shape
    m = w.shape[0]
    outs = []
    for gi in range(g):
        cg = cols[:, gi * (c // g):(gi + 1) * (c // g)].reshape(n, -1, oh * ow)
        wg = w[gi * (m // g):(gi + 1) * (m // g)].reshape(m // g, -1)
        outs.append(np.einsum("ok,nkp->nop", wg, cg, dtype=np.float32))
    y = np.concatenate(outs, axis=1).reshape(n, m, oh, ow)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y.astype(np.float32)


def run(model, feeds, want=None):
    """Runs `model` (onnx.ModelProto) on feeds {name: array}; returns {name: array} of every
    tensor computed (or of the names in `want`)."""
    env = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    env.update(feeds)
    for node in model.graph.node:
        a = _attrs(node)
        ins = [env[i] if i else None for i in node.input]
        op = node.op_type
        if op == "Conv":
            y = conv2d(ins[0], ins[1], ins[2] if len(ins) > 2 else None, a)
        elif op == "BatchNormalization":
            x, g, b, mean, var = ins
            eps = np.float32(a.get("epsilon", 1e-5))
            sh = (1, -1) + (1,) * (x.ndim - 2)
            y = ((x - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + eps) * g.reshape(sh)
                 + b.reshape(sh)).astype(np.float32)
        elif op == "Relu":
            y = np.maximum(ins[0], np.float32(0))
        elif op in ("AveragePool", "MaxPool"):
            if a.get("ceil_mode", 0):
                raise ValueError(f"{node.name}: ceil_mode is not supported")
            win = _windows(ins[0], a["kernel_shape"], a.get("strides", [1, 1]),
                           a.get("pads", [0, 0, 0, 0]), [1, 1])
            if op == "MaxPool":
                y = win.max(axis=(2, 3))
            else:
                if any(a.get("pads", [0])):
                    raise ValueError(f"{node.name}: padded AveragePool is not supported")
                y = win.mean(axis=(2, 3), dtype=np.float32)
        elif op == "Flatten":
            ax = a.get("axis", 1)
            y = ins[0].reshape(int(np.prod(ins[0].shape[:ax])), -1)
        elif op == "Gemm":
            x, w = ins[0], ins[1]
            if a.get("transA", 0):
                x = x.T
            if a.get("transB", 0):
                w = w.T
            y = np.float32(a.get("alpha", 1.0)) * (x @ w)
            if len(ins) > 2 and ins[2] is not None:
                y = y + np.float32(a.get("beta", 1.0)) * ins[2]
        elif op == "MatMul":
            y = ins[0] @ ins[1]
        elif op == "Add":
            y = ins[0] + ins[1]
        elif op == "Mul":
            y = ins[0] * ins[1]
        elif op == "Div":
            y = ins[0] / ins[1]
        elif op == "Clip":
            y = np.clip(ins[0], ins[1], ins[2])
        elif op == "Identity":
            y = ins[0]
        elif op == "QuantizeLinear":
            zp = ins[2] if len(ins) > 2 and ins[2] is not None else np.uint8(0)
            y = quantize_linear(ins[0], ins[1], zp, a.get("axis", 1))
        elif op == "DequantizeLinear":
            zp = ins[2] if len(ins) > 2 and ins[2] is not None else np.zeros((), ins[0].dtype)
            y = dequantize_linear(ins[0], ins[1], zp, a.get("axis", 1))
        else:
            raise ValueError(f"node {node.name}: op {op} is not supported by onnx_eval")
        if op not in ("QuantizeLinear",) and np.asarray(y).dtype.kind == "f":
            y = np.asarray(y, np.float32)
        env[node.output[0]] = y
    if want is not None:
        return {k: env[k] for k in want}
    return env
