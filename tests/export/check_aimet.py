"""Checks an AIMET encodings file against its JSON Schema (python3-jsonschema) and the
invariants of exporters spec 3.7: min == offset*scale and max == (2^bw-1+offset)*scale to 1 ulp,
offset in [-(2^bw-1), 0], one PER_TENSOR value or a PER_CHANNEL list, equal list lengths,
is_symmetric/is_sym only with offset -2^(bw-1). Usage: check_aimet.py SCHEMA FILE [CHANNELS_JSON]
where CHANNELS_JSON maps param names to their Cout. Exit 0 when valid, 1 with a message."""
import json
import math
import sys

import jsonschema


def fail(msg):
    print("check_aimet: " + msg)
    sys.exit(1)


def close(a, b):
    return a == b or abs(a - b) <= math.ulp(max(abs(a), abs(b)))


def check_grid(name, bw, offset, scale, sym, lo=None, hi=None):
    if not -(2 ** bw - 1) <= offset <= 0:
        fail(f"{name}: offset {offset} outside [-(2^bw-1), 0]")
    if sym and offset != -(2 ** (bw - 1)):
        fail(f"{name}: symmetric with offset {offset}")
    if lo is not None and not close(lo, offset * scale):
        fail(f"{name}: min {lo} != offset*scale {offset * scale}")
    if hi is not None and not close(hi, (2 ** bw - 1 + offset) * scale):
        fail(f"{name}: max {hi} is not on the grid")


def main():
    schema = json.load(open(sys.argv[1]))
    doc = json.load(open(sys.argv[2]))
    channels = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    try:
        jsonschema.Draft7Validator(schema).validate(doc)
    except jsonschema.ValidationError as e:
        fail("schema: " + e.message)
    if doc["version"] == "0.6.1":
        for kind in ("activation_encodings", "param_encodings"):
            for name, encs in doc[kind].items():
                if kind == "activation_encodings" and len(encs) != 1:
                    fail(f"{name}: an activation has one encoding")
                if name in channels and len(encs) not in (1, channels[name]):
                    fail(f"{name}: {len(encs)} encodings for Cout {channels[name]}")
                for e in encs:
                    check_grid(name, e["bitwidth"], e["offset"], e["scale"],
                               e["is_symmetric"] == "True", e["min"], e["max"])
    else:
        for kind in ("activation_encodings", "param_encodings"):
            for e in doc[kind]:
                name = e["name"]
                if len(e["scale"]) != len(e["offset"]):
                    fail(f"{name}: scale and offset lengths differ")
                if (e["enc_type"] == "PER_TENSOR") != (len(e["scale"]) == 1):
                    fail(f"{name}: enc_type {e['enc_type']} with {len(e['scale'])} scales")
                if name in channels and len(e["scale"]) not in (1, channels[name]):
                    fail(f"{name}: {len(e['scale'])} scales for Cout {channels[name]}")
                for s, o in zip(e["scale"], e["offset"]):
                    check_grid(name, e["bw"], o, s, e["is_sym"])
    print("check_aimet: ok")


main()
