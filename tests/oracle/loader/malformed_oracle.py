"""Malformed inputs built from files written by gguf-py and the safetensors package. gguf-py's GGUFReader says
where every structural field lies; each is corrupted in turn (truncation at every byte of the header and at every
field boundary, lengths and counts near 2^64, bad types, n_dims 100, offsets misaligned / overlapping / out of the
file, bad versions and magic), and qrt must refuse each with a message naming what is wrong.

usage: malformed_oracle.py <qrt_loader_check> <work dir>
"""
import json
import os
import shutil
import struct
import sys

from oracle_common import Failures, require_modules, run_check

require_modules()

import numpy as np  # noqa: E402
import gguf  # noqa: E402
from gguf import GGMLQuantizationType as Q, GGUFValueType as V, quants  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

checker, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
seed = int.from_bytes(os.urandom(4), "little")
print(f"seed {seed}")
rng = np.random.default_rng(seed)
failures = Failures()


def u32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def u64(v):
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


def run_mutations(kind, path, cases):
    """cases: (mutation dict, expected: None = must parse, else a list of fragments one of which the message holds,
    each fragment a string or a tuple of strings that must all appear)."""
    rc, results = run_check(checker, "mutate", kind, path, stdin=json.dumps({"mutations": [c[0] for c in cases]}))
    failures.check(rc == 0 and len(results) == len(cases), f"{kind}: mutate run")
    for (mutation, expected, label), result in zip(cases, results):
        if expected is None:
            failures.check(result["ok"], f"{label}: expected to parse, got {result.get('message')!r}")
            continue
        if not failures.check(not result["ok"], f"{label}: parsed but should have failed"):
            continue
        msg = result["message"]
        alternatives = [e if isinstance(e, tuple) else (e,) for e in expected]
        failures.check(any(all(f in msg for f in alt) for alt in alternatives),
                       f"{label}: message {msg!r} lacks {expected}")


# ---------------------------------------------------------------------------------------------------------- GGUF
path = os.path.join(work, "model.gguf")
w = gguf.GGUFWriter(path, arch="llama")
w.add_custom_alignment(64)
w.add_uint32("llama.block_count", 1)
w.add_string("general.name", "malformed fixture " + str(seed))
w.add_array("tokenizer.ggml.tokens", ["<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(20)])
w.add_array("tokenizer.ggml.scores", [float(x) for x in rng.normal(size=23)])
w.add_key_value("test.nested", [[1, 2], [3]], V.ARRAY)
w.add_tensor("token_embd.weight", rng.normal(size=(23, 32)).astype(np.float32))
w.add_tensor("blk.0.attn_q.weight", quants.quantize(rng.normal(size=(32, 64)).astype(np.float32), Q.Q8_0),
             raw_dtype=Q.Q8_0)
w.add_tensor("output_norm.weight", rng.normal(size=(32,)).astype(np.float16))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

reader = gguf.GGUFReader(path)
size = os.path.getsize(path)
data_end = max(int(t.data_offset) + int(t.n_bytes) for t in reader.tensors)
header_end = min(int(t.data_offset) for t in reader.tensors)


def part_offsets(field):
    """Offsets of the parts of a GGUFReader field (they lie back to back in the file)."""
    offs, at = [], field.offset
    for p in field.parts:
        offs.append(at)
        at += p.nbytes
    return offs


cases = []
# Truncation at every byte up to the end of the last tensor: every one must fail; from there on (padding) parse.
for n in range(0, data_end):
    cases.append(({"truncate": n}, ["gguf 'mutated'"], f"truncate {n}"))
for n in range(data_end, size + 1):
    cases.append(({"truncate": n}, None, f"truncate {n}"))

# Header.
cases += [
    ({"patch": 0, "hex": b"GGUG".hex()}, ["not a GGUF file"], "magic"),
    ({"patch": 4, "hex": u32(1).hex()}, ["v1 is no longer supported"], "version 1"),
    ({"patch": 4, "hex": u32(4).hex()}, ["version 4"], "version 4"),
    ({"patch": 4, "hex": u32(0x03000000).hex()}, ["big-endian"], "byte-swapped version"),
    ({"patch": 8, "hex": u64(1 << 62).hex()}, ["tensor count", "cannot fit"], "n_tensors 2^62"),
    ({"patch": 16, "hex": u64(1 << 62).hex()}, ["metadata key count", "cannot fit"], "n_kv 2^62"),
    ({"patch": 16, "hex": u64(-1).hex()}, ["metadata key count -1 is negative"], "n_kv -1"),
]

# Every key/value: its key length, its type, its string length or array type and count.
kv_fields = [f for name, f in reader.fields.items() if not name.startswith("GGUF.")]
for i, f in enumerate(kv_fields):
    offs = part_offsets(f)
    where = f"metadata key #{i}"
    cases.append(({"patch": offs[0], "hex": u64(-1).hex()}, [(where, "claims")], f"{f.name}: key length 2^64-1"))
    cases.append(({"patch": offs[2], "hex": u32(13).hex()}, [(where, "value type 13")], f"{f.name}: value type 13"))
    vtype = int(f.types[0])
    if vtype == int(V.STRING):
        cases.append(({"patch": offs[3], "hex": u64((1 << 64) - 9).hex()}, [(f"'{f.name}'", "string value", "claims")],
                      f"{f.name}: string length near 2^64"))
    if vtype == int(V.ARRAY):
        cases.append(({"patch": offs[3], "hex": u32(13).hex()}, [(f"'{f.name}'", "array element type 13")],
                      f"{f.name}: array element type 13"))
        cases.append(({"patch": offs[4], "hex": u64(1 << 62).hex()}, [(f"'{f.name}'", "elements", "limit")],
                      f"{f.name}: array length 2^62"))
        cases.append(({"patch": offs[4], "hex": u64(1 << 28).hex()}, [(f"'{f.name}'", "needs at least")],
                      f"{f.name}: array length 2^28"))
    if f.name == "general.alignment":
        for bad in (0, 3, 4, 96):
            cases.append(({"patch": offs[3], "hex": u32(bad).hex()}, [f"general.alignment = {bad}"],
                          f"alignment {bad}"))

# Every tensor info: n_dims, ne, type, offset.
for i, t in enumerate(reader.tensors):
    offs = part_offsets(t.field)
    who = f"'{t.name}'"
    cases += [
        ({"patch": offs[0], "hex": u64(-1).hex()}, [(f"tensor info #{i}", "claims")], f"{t.name}: name length"),
        ({"patch": offs[2], "hex": u32(100).hex()}, [(f"tensor info #{i}", "n_dims = 100")], f"{t.name}: n_dims 100"),
        ({"patch": offs[3], "hex": u64(-1).hex()}, [(f"tensor info #{i}", "is negative")], f"{t.name}: ne[0] -1"),
        ({"patch": offs[3], "hex": u64(1 << 62).hex()}, [(who, "overflows"), (who, "past the end")],
         f"{t.name}: ne[0] 2^62"),
        ({"patch": offs[4], "hex": u32(4).hex()}, [(who, "Q4_2 (4)", "removed")], f"{t.name}: type 4"),
        ({"patch": offs[4], "hex": u32(36).hex()}, [(who, "IQ4_NL_4_4 (36)", "removed")], f"{t.name}: type 36"),
        ({"patch": offs[4], "hex": u32(1000).hex()}, [(who, "unknown GGML type 1000")], f"{t.name}: type 1000"),
        ({"patch": offs[5], "hex": u64(int(t.data_offset) - header_end + 8).hex()},
         [(who, "not a multiple of the alignment 64")], f"{t.name}: misaligned offset"),
        ({"patch": offs[5], "hex": u64(1 << 63).hex()}, [(who, "past the end")], f"{t.name}: offset 2^63"),
        ({"patch": offs[5], "hex": u64((1 << 64) - 64).hex()}, [(who, "past the end")], f"{t.name}: offset 2^64-64"),
    ]
    if i > 0:
        prev = reader.tensors[i - 1]
        cases.append(({"patch": offs[5], "hex": u64(int(prev.data_offset) - header_end).hex()},
                      [(who, "overlaps", f"'{prev.name}'")], f"{t.name}: overlapping offset"))

run_mutations("gguf", path, cases)
print(f"gguf: {len(cases)} mutations")

# --------------------------------------------------------------------------------------------------- safetensors
st_path = os.path.join(work, "model.safetensors")
arrays = {"a": rng.normal(size=(4, 8)).astype(np.float32), "b": rng.normal(size=(3,)).astype(np.float16),
          "c": rng.integers(0, 100, size=(2, 2)).astype(np.int64)}
save_file(arrays, st_path, metadata={"format": "pt"})
with open(st_path, "rb") as f:
    raw = f.read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
body = raw[8 + n:]


def with_header(h):
    """A whole replacement file: this header (as JSON) and the original data buffer."""
    text = json.dumps(h).encode()
    return {"truncate": 0, "patch": 0, "hex": (u64(len(text)) + text + body).hex()}


def edited(name, **changes):
    h = json.loads(json.dumps(header))
    h[name].update(changes)
    return h


a_begin, a_end = header["a"]["data_offsets"]
st_cases = [({"truncate": k}, ["safetensors 'mutated'"], f"truncate {k}") for k in range(len(raw))]
st_cases += [
    ({"patch": 0, "hex": u64(-1).hex()}, ["header length"], "header length 2^64-1"),
    ({"patch": 0, "hex": u64(len(raw)).hex()}, ["header length"], "header length = file size"),
    ({"patch": 8, "hex": b"[".hex()}, ["not valid JSON"], "broken JSON"),
    (with_header(edited("a", dtype="F33")), [("tensor 'a'", "unknown dtype 'F33'")], "unknown dtype"),
    (with_header(edited("a", dtype="F16")), [("tensor 'a'", "needs 64 bytes")], "wrong dtype for the span"),
    (with_header(edited("a", shape=[4, 9])), [("tensor 'a'", "needs 144 bytes")], "wrong shape"),
    (with_header(edited("a", shape=[4, -8])), [("tensor 'a'", "negative")], "negative dim"),
    (with_header(edited("a", data_offsets=[a_begin, len(body) + 8])), [("tensor 'a'", "past the data buffer")],
     "end past the buffer"),
    (with_header(edited("a", data_offsets=[a_end, a_begin])), [("tensor 'a'", "end before they begin")],
     "reversed offsets"),
    (with_header(edited("b", data_offsets=[a_begin, a_begin + 6])), [("overlap",)], "overlap"),
    (with_header(edited("a", data_offsets=[2**64 - 1, 2**64 - 1])), [("tensor 'a'", "past the data buffer")],
     "offsets near 2^64"),
    (with_header({**header, "__metadata__": {"k": 5}}), [("__metadata__", "'k'")], "non-string metadata"),
    (with_header(header), None, "unchanged header re-serialized"),
]
run_mutations("safetensors", st_path, st_cases)
print(f"safetensors: {len(st_cases)} mutations")

failures.finish("malformed_oracle")
