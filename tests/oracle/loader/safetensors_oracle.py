"""safetensors files written by the safetensors package (numpy API) read back through qrt_loader_check: names,
dtypes, shapes, offsets (against the header as Python's json reads it), every entry's bytes (against the arrays
the package loads back) and sample values of the dense float entries.

usage: safetensors_oracle.py <qrt_loader_check> <work dir>
"""
import json
import os
import shutil
import struct
import sys

from oracle_common import Failures, require_modules, run_check, same_float

require_modules()

import numpy as np  # noqa: E402
from safetensors.numpy import load_file, save_file  # noqa: E402

checker, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
seed = int.from_bytes(os.urandom(4), "little")
print(f"seed {seed}")
rng = np.random.default_rng(seed)
failures = Failures()

DTYPES = {np.float32: "F32", np.float16: "F16", np.float64: "F64", np.int8: "I8", np.int16: "I16", np.int32: "I32",
          np.int64: "I64", np.uint8: "U8", np.uint16: "U16", np.uint32: "U32", np.uint64: "U64", np.bool_: "BOOL"}


def random_array(dtype, shape):
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.floating):
        return rng.normal(size=shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


def check(path, tensors, metadata, label):
    rc, ours = run_check(checker, "safetensors", path)
    if not failures.check(rc == 0 and ours["ok"], f"{label}: parse failed: {ours.get('message')}"):
        return
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    loaded = load_file(path)
    failures.check(ours["header_bytes"] == n and ours["data_offset"] == 8 + n, f"{label}: header length")
    failures.check(ours["metadata"] == (metadata or {}), f"{label}: metadata {ours['metadata']}")
    names = [e["name"] for e in ours["entries"]]
    failures.check(names == sorted(tensors), f"{label}: names {names}")
    for e in ours["entries"]:
        name = e["name"]
        arr = tensors[name]
        h = header[name]
        failures.check(e["dtype"] == DTYPES[arr.dtype.type] == h["dtype"], f"{label}: {name} dtype {e['dtype']}")
        failures.check(e["shape"] == list(arr.shape) == h["shape"], f"{label}: {name} shape {e['shape']}")
        failures.check([e["begin"], e["end"]] == h["data_offsets"], f"{label}: {name} offsets")
        span = raw[e["file_offset"]:e["file_offset"] + e["end"] - e["begin"]]
        failures.check(span == loaded[name].tobytes() == arr.tobytes(), f"{label}: {name} bytes")
        if "values" in e and e["values"] is not None:
            rows = arr.reshape(-1, arr.shape[-1]) if arr.ndim > 0 else arr.reshape(1, 1)
            for key, row in (("first_row", rows[0]), ("last_row", rows[-1])):
                vals = e["values"][key]
                ok = len(vals) == min(16, row.size) and all(same_float(a, b) for a, b in zip(vals, row[:16]))
                failures.check(ok, f"{label}: {name} {key}")
        elif arr.dtype in (np.float32, np.float16) and arr.size > 0:
            failures.check(False, f"{label}: {name} has no sample values")


# 1. Every dtype the numpy API writes, several ranks, a scalar, an empty tensor, metadata.
tensors = {}
for i, dtype in enumerate(DTYPES):
    shape = [(5,), (3, 7), (2, 3, 4), (33, 64)][i % 4]
    tensors[f"t{i:02d}.{DTYPES[dtype].lower()}"] = random_array(dtype, shape)
tensors["model.layers.0.mlp.down_proj.weight"] = random_array(np.float16, (16, 48))
tensors["scalar"] = np.array(rng.normal(), dtype=np.float32)
tensors["empty"] = np.zeros((0, 4), dtype=np.float32)
metadata = {"format": "pt", "seed": str(seed), "note": "ünïcode ✓"}
path = os.path.join(work, "all_dtypes.safetensors")
save_file(tensors, path, metadata=metadata)
check(path, tensors, metadata, "all_dtypes")

# 2. No metadata, one big-ish tensor.
big = {"w": random_array(np.float32, (257, 129))}
path = os.path.join(work, "single.safetensors")
save_file(big, path)
check(path, big, None, "single")

failures.finish("safetensors_oracle")
