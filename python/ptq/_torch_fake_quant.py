"""Quantize-dequantize on a torch model (used by ptq.torch and ptq.amct): DMQ factors shaped
over a layer's weight or input, a layer input fake-quantized as the record says (a forward
pre-hook), and the SQNR of that quantization."""
import numpy as np
import torch

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


def _balance_input_shape(layer_type, module):
    """How the factors broadcast over the layer's input: the last axis for Linear, axis 1
    otherwise."""
    if layer_type == "Linear":
        return (-1,)
    return (1, -1) + (1,) * (module.weight.dim() - 2)


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
