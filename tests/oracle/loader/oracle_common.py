"""Shared helpers for the loader oracle scripts: module checks, running qrt_loader_check, and collecting failures."""
import json
import math
import os
import subprocess
import sys

SKIP = 77


def require_modules():
    """Exits 77 (skipped) when the Python references are not installed."""
    try:
        import numpy  # noqa: F401
        import gguf  # noqa: F401
        import safetensors  # noqa: F401
    except ImportError as e:
        print(f"skipped: Python reference missing ({e}); install tests/oracle/requirements.txt")
        sys.exit(SKIP)


def test_data_dir():
    """The shared data folder, or None (callers skip)."""
    d = os.environ.get("QRT_TEST_DATA")
    if d and os.path.isdir(d):
        return d
    return None


def run_check(checker, *args, stdin=None):
    """Runs qrt_loader_check; returns (exit code, parsed JSON). Exit 2 or unparsable output is a test failure."""
    proc = subprocess.run([checker, *args], input=stdin, capture_output=True, text=True, timeout=240)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"qrt_loader_check {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.returncode, json.loads(proc.stdout)


def hex_of(value):
    """How qrt_loader_check prints a GGUF string: the bytes in hex."""
    if isinstance(value, str):
        value = value.encode("utf-8")
    return bytes(value).hex()


def same_float(ours, ref):
    """Compares a value printed by the checker (number or "nan"/"inf"/"-inf") with a reference float exactly."""
    ref = float(ref)
    if isinstance(ours, str):
        if ours == "nan":
            return math.isnan(ref)
        return ours == ("inf" if ref > 0 else "-inf") and math.isinf(ref)
    return float(ours) == ref


class Failures:
    """Collects failures so one run reports all of them."""

    def __init__(self):
        self.items = []
        self.checks = 0

    def check(self, cond, what):
        self.checks += 1
        if not cond:
            self.items.append(what)
            print("FAIL:", what)
        return cond

    def finish(self, name):
        if self.items:
            print(f"{name}: {len(self.items)} of {self.checks} checks failed")
            sys.exit(1)
        print(f"{name}: all {self.checks} checks passed")
        sys.exit(0)


GGUF_TYPE_NAMES = {0: "u8", 1: "i8", 2: "u16", 3: "i16", 4: "u32", 5: "i32", 6: "f32", 7: "bool", 8: "string",
                   9: "array", 10: "u64", 11: "i64", 12: "f64"}


def reader_scalar(field, part_index, vtype):
    """One value of a GGUFReader field, from the raw parts (strings stay bytes)."""
    part = field.parts[part_index]
    if vtype == 8:
        return bytes(part)
    return part[0].item()


def same_value(ours, ref, vtype):
    """Compares one printed scalar with a reference of GGUF type vtype exactly."""
    if vtype == 8:
        return ours == hex_of(ref)
    if vtype in (6, 12):
        return same_float(ours, ref)
    if vtype == 7:
        return ours is bool(ref) or ours == bool(ref)
    return not isinstance(ours, (str, bool)) and int(ours) == int(ref)


def compare_metadata_with_reader(ours, reader, failures, label):
    """Our metadata list (checker JSON) against gguf-py's GGUFReader fields: order, types and every value."""
    import numpy as np  # noqa: F401

    fields = [f for name, f in reader.fields.items() if not name.startswith("GGUF.")]
    failures.check([m["key"] for m in ours] == [f.name for f in fields], f"{label}: metadata keys and order")
    by_key = {m["key"]: m for m in ours}
    for f in fields:
        m = by_key.get(f.name)
        if not failures.check(m is not None, f"{label}: key {f.name} missing"):
            continue
        vtype = int(f.types[0])
        if not failures.check(m["type"] == GGUF_TYPE_NAMES[vtype], f"{label}: {f.name} type {m['type']}"):
            continue
        if vtype != 9:
            failures.check(same_value(m["value"], reader_scalar(f, f.data[0], vtype), vtype),
                           f"{label}: {f.name} value {m['value']!r}")
            continue
        elem = int(f.types[1]) if len(f.types) > 1 else None
        arr = m["value"]
        if elem is None or elem == 9:
            continue  # gguf-py flattens nested arrays; the writer-based tests check those
        failures.check(arr["elem_type"] == GGUF_TYPE_NAMES[elem], f"{label}: {f.name} element type")
        items = arr["items"]
        if not failures.check(len(items) == len(f.data), f"{label}: {f.name} has {len(items)} items, "
                                                         f"reader {len(f.data)}"):
            continue
        bad = [i for i, (o, p) in enumerate(zip(items, f.data)) if not same_value(o, reader_scalar(f, p, elem), elem)]
        failures.check(not bad, f"{label}: {f.name} differs at items {bad[:5]}")


def compare_tensors_with_reader(ours, reader, failures, label):
    """Our tensor list (file order) against GGUFReader: names, types, ne, offsets, sizes and sample values."""
    import numpy as np
    from gguf import quants

    failures.check(len(ours) == len(reader.tensors), f"{label}: {len(ours)} tensors, reader {len(reader.tensors)}")
    for o, t in zip(ours, reader.tensors):
        name = t.name
        failures.check(o["name"] == name, f"{label}: tensor name {o['name']} vs {name}")
        failures.check(o["ggml_type"] == int(t.tensor_type), f"{label}: {name} type")
        failures.check(o["ne"] == [int(x) for x in t.shape], f"{label}: {name} ne {o['ne']} vs {list(t.shape)}")
        failures.check(o["file_offset"] == int(t.data_offset), f"{label}: {name} offset")
        failures.check(o["nbytes"] == int(t.n_bytes), f"{label}: {name} nbytes {o['nbytes']} vs {t.n_bytes}")
        if o["format"] is None:
            continue
        failures.check(o["shape"] == [int(x) for x in reversed(list(t.shape))], f"{label}: {name} shape")
        if o["values"] is None:
            continue
        ref = quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(-1, int(t.shape[0]))
        for key, row in (("first_row", ref[0]), ("last_row", ref[-1])):
            vals = o["values"][key]
            ok = len(vals) == min(16, row.size) and all(same_float(a, b) for a, b in zip(vals, row[:16]))
            failures.check(ok, f"{label}: {name} {key} {vals[:4]} vs {row[:4]}")
