#!/usr/bin/env python3
"""qrt's GGUF writer read back by gguf-py (GGUFReader), a reader we did not write: every metadata type and value
(scalars, unicode strings, arrays), a key set twice, and tensors in F32, F16, BF16, Q8_0 and Q4_K with their
names, shapes, types, data offsets on the alignment (default 32, and 64 when asked), and values (dequantized by
gguf-py against the formula the sample used: exact for the float types, within the format's error otherwise).

usage: test_gguf_writer.py <qrt_gguf_writer_sample> <work dir>
"""
import math
import os
import subprocess
import sys

try:
    import numpy as np
    from gguf import GGUFReader, GGMLQuantizationType, GGUFValueType
    from gguf import quants
except ImportError as e:  # pragma: no cover
    print("skipped: missing python module:", e)
    sys.exit(77)

TOOL, WORK = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "e2e"))
from e2e_checks import check, finish  # noqa: E402


def values(n, tensor):
    i = np.arange(n, dtype=np.float32)
    return (np.sin(np.float32(0.37) * i + np.float32(tensor)) * np.float32(2.0)).astype(np.float32)


def scalar(field):
    return field.parts[field.data[0]].tolist()[0] if field.types[0] != GGUFValueType.STRING else \
        bytes(field.parts[field.data[0]]).decode()


os.makedirs(WORK, exist_ok=True)
for alignment in (None, 64):
    path = os.path.join(WORK, f"sample-{alignment or 32}.gguf")
    r = subprocess.run([TOOL, path] + ([str(alignment)] if alignment else []), capture_output=True, text=True)
    check(f"sample {alignment} written", r.returncode == 0, r.stderr)
    if r.returncode != 0:
        continue
    g = GGUFReader(path)
    f = g.fields
    want = {"test.u8": (GGUFValueType.UINT8, 200), "test.i8": (GGUFValueType.INT8, -100),
            "test.u16": (GGUFValueType.UINT16, 60000), "test.i16": (GGUFValueType.INT16, -30000),
            "test.u32": (GGUFValueType.UINT32, 4000000000), "test.i32": (GGUFValueType.INT32, -2000000000),
            "test.u64": (GGUFValueType.UINT64, 18000000000000000000),
            "test.i64": (GGUFValueType.INT64, -9000000000000000000),
            "test.f32": (GGUFValueType.FLOAT32, float(np.float32(0.1))), "test.f64": (GGUFValueType.FLOAT64, 0.1),
            "test.bool": (GGUFValueType.BOOL, True), "test.replaced": (GGUFValueType.UINT32, 2),
            "general.name": (GGUFValueType.STRING, "qrt writer sample: ünïcode ✓")}
    for key, (typ, val) in want.items():
        got = f.get(key)
        check(f"{key} type", got is not None and got.types == [typ], got and got.types)
        check(f"{key} value", got is not None and scalar(got) == val, got and scalar(got))
    strings = f["test.strings"]
    check("string array", strings.types == [GGUFValueType.ARRAY, GGUFValueType.STRING] and
          [bytes(strings.parts[i]).decode() for i in strings.data] == ["a", "", "ünï", "<s>"])
    check("i32 array", [f["test.i32s"].parts[i].tolist()[0] for i in f["test.i32s"].data] == [1, -2, 3])
    check("f32 array", [f["test.f32s"].parts[i].tolist()[0] for i in f["test.f32s"].data] == [0.5, -1.25])
    keys = [k for k in f if not k.startswith("GGUF.")]
    check("key order, replaced key in its first place", keys.index("test.replaced") == keys.index("test.f32s") + 1,
          keys)
    if alignment:
        check("general.alignment", scalar(f["general.alignment"]) == alignment)
    align = alignment or 32
    check("data section aligned", g.data_offset % align == 0, g.data_offset)
    specs = [("f32", GGMLQuantizationType.F32, [3, 5], 0), ("f16", GGMLQuantizationType.F16, [2, 4], 0),
             ("bf16", GGMLQuantizationType.BF16, [2, 8], 0.01), ("q8_0", GGMLQuantizationType.Q8_0, [2, 64], 0.01),
             ("q4_k", GGMLQuantizationType.Q4_K, [3, 256], 0.1), ("vector", GGMLQuantizationType.F32, [7], 0)]
    tensors = {t.name: t for t in g.tensors}
    check("tensor names in order", [t.name for t in g.tensors] == [s[0] for s in specs], [t.name for t in g.tensors])
    for index, (name, typ, shape, tol) in enumerate(specs):
        t = tensors.get(name)
        if t is None:
            check(f"{name} present", False)
            continue
        check(f"{name} type", t.tensor_type == typ, t.tensor_type)
        check(f"{name} shape (GGUF order)", list(t.shape) == shape[::-1], list(t.shape))
        check(f"{name} offset aligned", (t.data_offset - g.data_offset) % align == 0, t.data_offset)
        n = math.prod(shape)
        got = quants.dequantize(t.data, typ).reshape(-1).astype(np.float64)
        want_v = values(n, index).astype(np.float64)
        if typ == GGMLQuantizationType.F16:
            want_v = want_v.astype(np.float16).astype(np.float64)
        err = float(np.linalg.norm(got - want_v) / np.linalg.norm(want_v))
        check(f"{name} values ({err:.2e})", err <= tol)

finish()
