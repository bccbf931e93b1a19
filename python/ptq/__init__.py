"""ptq: post-training quantization calibration, the AMCT toolkit's numbers, from Python.

The C++ library's bindings (docs/python.md). Tensors are numpy arrays (float32, float16) or CPU
torch tensors (float32, float16, bfloat16), in any strides; ptq reads them where they lie, with
no copy, and releases the GIL while it works. Every error of the library is a ptq.Error.

    import ptq
    config = ptq.parse_config(open("quant.cfg").read(), "quant.cfg")
    observer = ptq.HfmgObserver(num_of_bins=4096)
    observer.observe(batch)
    observer.estimate()          # {'scale': ..., 'offset': ..., 'bits': 8, ...}

ptq.torch calibrates a torch.nn.Module from its own forward passes; ptq.amct is the toolkit's
PyTorch API (create_quant_config, quantize_model, save_model, ...).
"""


class Error(ValueError):
    """An error of ptq's library: `code` ("E909"), `name` ("tensor_view_invalid"), `message`,
    and where it points in a text file: `path`, `line`, `column` (0 when unknown); `note` and
    the `warnings` found before it (dicts with the same keys)."""

    def __init__(self, message, *, code="", name="", path="", line=0, column=0, note="",
                 warnings=()):
        super().__init__(message)
        self.message = message
        self.code = code
        self.name = name
        self.path = path
        self.line = line
        self.column = column
        self.note = note
        self.warnings = list(warnings)

    def __str__(self):
        where = f"{self.path}:{self.line}:{self.column}: " if self.path and self.line else (
            f"{self.path}: " if self.path else "")
        text = f"{where}{self.message} [{self.code}]"
        return f"{text}\nnote: {self.note}" if self.note else text

    def __reduce__(self):
        return (_error, (self.message, self.code, self.name, self.path, self.line, self.column,
                         self.note, self.warnings))


def _error(message, code, name, path, line, column, note, warnings):
    return Error(message, code=code, name=name, path=path, line=line, column=column, note=note,
                 warnings=warnings)


from ._ptq import (  # noqa: E402  (after Error: the module raises it)
    Config, Plan, Record, Session, __version__, arq, dmq_factors, kernels, parse_config,
    parse_record, read_quant_config, read_record_json, read_safetensors)
from . import _ptq  # noqa: E402


def read_config(path):
    """Reads and checks a simple quantization config file."""
    with open(path, encoding="utf-8") as f:
        return parse_config(f.read(), path)


def write_safetensors(path, tensors):
    """Writes {name: tensor} (numpy arrays or torch tensors) as a float32 safetensors file,
    atomically."""
    _ptq._write_safetensors(path, list(tensors.items()))


def IfmrObserver(bits=8, asymmetric=True, max_percentile=0.999999, min_percentile=0.999999,
                 search_range=(0.7, 1.3), search_step=0.01, threads=1):
    """The IFMR activation observer (the toolkit's defaults). Its settings are checked here."""
    return _ptq._make_ifmr(bits, asymmetric, max_percentile, min_percentile,
                           tuple(search_range), search_step, threads)


def HfmgObserver(num_of_bins=4096, bits=8, asymmetric=True, threads=1):
    """The HFMG activation observer: one histogram, whatever the number of batches."""
    return _ptq._make_hfmg(num_of_bins, bits, asymmetric, threads)


__all__ = ["Error", "Config", "Plan", "Record", "Session", "IfmrObserver", "HfmgObserver",
           "arq", "dmq_factors", "parse_config", "read_config", "parse_record",
           "read_record_json", "read_quant_config", "read_safetensors", "write_safetensors", "kernels",
           "__version__"]
