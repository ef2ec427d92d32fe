"""GGUF files written by gguf-py's GGUFWriter (every metadata type, nested arrays, several tensor types, a custom
alignment, a split set, a big-endian file) read back through qrt_loader_check and compared with what was written
and with gguf-py's GGUFReader.

usage: gguf_oracle.py <qrt_loader_check> <work dir>
"""
import os
import random
import shutil
import sys

from oracle_common import (Failures, GGUF_TYPE_NAMES, compare_metadata_with_reader, compare_tensors_with_reader,
                           hex_of, require_modules, run_check, same_float)

require_modules()

import numpy as np  # noqa: E402
import gguf  # noqa: E402
from gguf import GGMLQuantizationType as Q, GGUFValueType as V, quants  # noqa: E402

checker, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
seed = int.from_bytes(os.urandom(4), "little")
print(f"seed {seed}")
rng = np.random.default_rng(seed)
prng = random.Random(seed)
failures = Failures()


def rand_ints(lo, hi, n):
    return [prng.randint(lo, hi) for _ in range(n)]


def random_metadata():
    """(key, value, type, sub_type) for every GGUF value type, scalars and arrays, plus nested arrays."""
    f32 = [float(np.float32(x)) for x in rng.normal(size=5)]
    kvs = [
        ("test.u8", rand_ints(0, 255, 1)[0], V.UINT8, None),
        ("test.i8", rand_ints(-128, 127, 1)[0], V.INT8, None),
        ("test.u16", rand_ints(0, 65535, 1)[0], V.UINT16, None),
        ("test.i16", rand_ints(-32768, 32767, 1)[0], V.INT16, None),
        ("test.u32", rand_ints(0, 2**32 - 1, 1)[0], V.UINT32, None),
        ("test.i32", rand_ints(-2**31, 2**31 - 1, 1)[0], V.INT32, None),
        ("test.f32", f32[0], V.FLOAT32, None),
        ("test.bool_true", True, V.BOOL, None),
        ("test.bool_false", False, V.BOOL, None),
        ("test.string", "héllo wörld ✓ " + str(seed), V.STRING, None),
        ("test.u64", rand_ints(2**40, 2**64 - 1, 1)[0], V.UINT64, None),
        ("test.i64", rand_ints(-2**63, 2**63 - 1, 1)[0], V.INT64, None),
        ("test.f64", float(rng.normal()), V.FLOAT64, None),
        ("test.arr_u8", rand_ints(0, 255, 7), V.ARRAY, V.UINT8),
        ("test.arr_i8", rand_ints(-128, 127, 7), V.ARRAY, V.INT8),
        ("test.arr_u16", rand_ints(0, 65535, 5), V.ARRAY, V.UINT16),
        ("test.arr_i16", rand_ints(-32768, 32767, 5), V.ARRAY, V.INT16),
        ("test.arr_u32", rand_ints(0, 2**32 - 1, 5), V.ARRAY, V.UINT32),
        ("test.arr_i32", rand_ints(-2**31, 2**31 - 1, 5), V.ARRAY, V.INT32),
        ("test.arr_f32", f32, V.ARRAY, V.FLOAT32),
        ("test.arr_bool", [bool(x) for x in rng.integers(0, 1, size=9, endpoint=True)], V.ARRAY, V.BOOL),
        ("test.arr_string", ["a", "", "ü", "tok" + str(seed), "\x00in\x00side"], V.ARRAY, V.STRING),
        ("test.arr_bytes_string", [b"\xff\xfe not utf-8", b"ok"], V.ARRAY, V.STRING),
        ("test.arr_u64", rand_ints(0, 2**64 - 1, 4), V.ARRAY, V.UINT64),
        ("test.arr_i64", rand_ints(-2**63, 2**63 - 1, 4), V.ARRAY, V.INT64),
        ("test.arr_f64", [float(x) for x in rng.normal(size=4)], V.ARRAY, V.FLOAT64),
        ("test.nested2", [rand_ints(-1000, 1000, 3), rand_ints(-1000, 1000, 1), rand_ints(-9, 9, 2)], V.ARRAY, None),
        ("test.nested3", [[["x", "yz"], ["w"]], [["v", "u", "t"]]], V.ARRAY, None),
        ("test.nested_f32", [[1.5, -2.25], [float(np.float32(rng.normal()))]], V.ARRAY, None),
        ("tokenizer.ggml.model", "llama", V.STRING, None),
        ("llama.block_count", 1, V.UINT32, None),
    ]
    return kvs


def same_written(ours, val, vtype, sub):
    """Whether the checker's printed value equals what GGUFWriter was given."""
    if vtype == V.ARRAY:
        ltype = sub if sub is not None else V.get_type(val[0])
        if ours.get("elem_type") != GGUF_TYPE_NAMES[int(ltype)] or len(ours["items"]) != len(val):
            return False
        return all(same_written(o, v, ltype, None) for o, v in zip(ours["items"], val))
    if vtype == V.STRING:
        return ours == hex_of(val)
    if vtype == V.FLOAT32:
        return same_float(ours, np.float32(val))
    if vtype == V.FLOAT64:
        return same_float(ours, val)
    if vtype == V.BOOL:
        return ours is bool(val)
    return not isinstance(ours, (bool, str)) and ours == val


def random_tensors():
    """(name, data, raw_dtype): dense, quantized by gguf-py, raw random K-quant blocks, 1-D, 3-D."""
    def normal(*shape):
        return rng.normal(size=shape).astype(np.float32)

    tensors = [
        ("token_embd.weight", normal(48, 64), None),
        ("blk.0.attn_q.weight", normal(64, 64).astype(np.float16), None),
        ("blk.0.attn_k.weight", quants.quantize(normal(32, 64), Q.BF16), Q.BF16),
        ("blk.0.ffn_up.weight", quants.quantize(normal(96, 64), Q.Q8_0), Q.Q8_0),
        ("blk.0.ffn_down.weight", quants.quantize(normal(64, 96), Q.Q4_0), Q.Q4_0),
        ("blk.0.ffn_gate.weight", quants.quantize(normal(96, 64), Q.Q5_1), Q.Q5_1),
        ("blk.0.attn_output.weight", quants.quantize(normal(64, 64), Q.MXFP4), Q.MXFP4),
        # Types gguf-py cannot quantize: random blocks (the reader only sizes them).
        ("blk.0.attn_v.weight", rng.integers(0, 255, size=(16, 144), dtype=np.uint8), Q.Q4_K),
        ("blk.1.attn_v.weight", rng.integers(0, 255, size=(8, 2 * 210), dtype=np.uint8), Q.Q6_K),
        ("blk.0.ffn_gate_exps.weight", normal(4, 32, 64), None),  # [experts, out, in]
        ("output_norm.weight", normal(64), None),
        # Plain integer / f64 tensors: GGML types that model weights never use (qrt may lack formats for them).
        ("test.positions", rng.integers(-1000, 1000, size=(3, 8)).astype(np.int32), None),
        ("test.f64", rng.normal(size=(2, 4)), None),
    ]
    return tensors


def write_gguf(path, kvs, tensors, alignment=None, endianess=gguf.GGUFEndian.LITTLE, split_max_tensors=0):
    w = gguf.GGUFWriter(path, arch="llama", endianess=endianess, split_max_tensors=split_max_tensors)
    if alignment:
        w.add_custom_alignment(alignment)
    for key, val, vtype, sub in kvs:
        w.add_key_value(key, val, vtype, sub_type=sub)
    for name, data, raw in tensors:
        w.add_tensor(name, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def check_file(path, kvs, label, alignment=32):
    """Reads one GGUFWriter file with the checker and compares it with the written values and GGUFReader."""
    rc, ours = run_check(checker, "gguf", path, "--allow-unsupported")
    if not failures.check(rc == 0 and ours["ok"], f"{label}: parse failed: {ours.get('message')}"):
        return None
    reader = gguf.GGUFReader(path)
    compare_metadata_with_reader(ours["metadata"], reader, failures, label)
    compare_tensors_with_reader(ours["tensors"], reader, failures, label)
    by_key = {m["key"]: m for m in ours["metadata"]}
    for key, val, vtype, sub in kvs:
        m = by_key.get(key)
        if failures.check(m is not None, f"{label}: {key} missing"):
            failures.check(m["type"] == GGUF_TYPE_NAMES[int(vtype)], f"{label}: {key} type {m['type']}")
            failures.check(same_written(m["value"], val, vtype, sub), f"{label}: {key} value {m['value']}")
    failures.check(ours["alignment"] == alignment, f"{label}: alignment {ours['alignment']}")
    failures.check(ours["data_offset"] % alignment == 0, f"{label}: data offset {ours['data_offset']} unaligned")
    failures.check(all(t["offset"] % alignment == 0 for t in ours["tensors"]), f"{label}: tensor offsets unaligned")
    return ours


def check_strict(path, ours, label):
    """Without --allow-unsupported, the first tensor without a qrt format must fail, naming type and tensor."""
    unsupported = [t for t in ours["tensors"] if t["format"] is None]
    rc, strict = run_check(checker, "gguf", path)
    if not unsupported:
        failures.check(rc == 0, f"{label}: strict parse failed: {strict.get('message')}")
        return
    first = unsupported[0]
    type_name = Q(first["ggml_type"]).name
    expected = f"unsupported tensor type {type_name} ({first['ggml_type']}) for tensor '{first['name']}'"
    failures.check(rc == 1 and strict["code"] == "unsupported" and expected in strict["message"],
                   f"{label}: strict error {strict.get('message')!r} lacks {expected!r}")


# 1. Every metadata type and several tensor types, default alignment.
kvs = random_metadata()
tensors = random_tensors()
path = os.path.join(work, "all_types.gguf")
write_gguf(path, kvs, tensors)
ours = check_file(path, kvs, "all_types")
if ours:
    check_strict(path, ours, "all_types")
    names = [t["name"] for t in ours["tensors"]]
    failures.check(names == [t[0] for t in tensors], "all_types: tensor order")
    exps = next(t for t in ours["tensors"] if t["name"] == "blk.0.ffn_gate_exps.weight")
    failures.check(exps["ne"] == [64, 32, 4] and exps["shape"] == [4, 32, 64], "all_types: 3-D shape reversed")

# 2. The same bytes labelled GGUF v2 (same layout) parse identically.
with open(path, "rb") as f:
    data = bytearray(f.read())
data[4:8] = (2).to_bytes(4, "little")
v2 = os.path.join(work, "all_types_v2.gguf")
with open(v2, "wb") as f:
    f.write(data)
rc, ours_v2 = run_check(checker, "gguf", v2, "--allow-unsupported")
failures.check(rc == 0 and ours_v2["version"] == 2 and ours and ours_v2["tensors"] == ours["tensors"],
               "v2: parses like v3")

# 3. Custom alignments.
for alignment in (64, 256):
    p = os.path.join(work, f"aligned_{alignment}.gguf")
    t = random_tensors()
    write_gguf(p, kvs[:3], t, alignment=alignment)
    check_file(p, kvs[:3], f"aligned_{alignment}", alignment=alignment)

# 4. A split set: 5 tensors, 2 per shard -> 3 shards; any shard may be named.
split_tensors = [(f"blk.{i}.attn_q.weight", rng.normal(size=(8, 32)).astype(np.float32), None) for i in range(5)]
base = os.path.join(work, "split", "model.gguf")
os.makedirs(os.path.dirname(base))
write_gguf(base, kvs[:4], split_tensors, split_max_tensors=2)
shards = [os.path.join(work, "split", f"model-{i:05d}-of-00003.gguf") for i in (1, 2, 3)]
failures.check(all(os.path.exists(s) for s in shards), "split: gguf-py wrote three shards")
expected_file = {}
for s in shards:
    for t in gguf.GGUFReader(s).tensors:
        expected_file[t.name] = s
for named in shards:
    rc, model = run_check(checker, "gguf-model", named)
    if not failures.check(rc == 0, f"split via {os.path.basename(named)}: {model.get('message')}"):
        continue
    failures.check(len(model["shards"]) == 3, "split: three shards")
    got = {t["name"]: t["file"] for t in model["tensors"]}
    failures.check(got == expected_file, f"split: tensor files {got}")
    first_keys = [m["key"] for m in model["shards"][0]["metadata"]]
    failures.check("test.u8" in first_keys and "split.count" in first_keys, "split: keys in the first shard")
    for i, shard in enumerate(model["shards"]):
        md = {m["key"]: m for m in shard["metadata"]}
        failures.check(md["split.no"]["type"] == "u16" and md["split.no"]["value"] == i, f"split: split.no {i}")
        failures.check(md["split.count"]["value"] == 3, "split: split.count")
    for s in shards:
        compare_tensors_with_reader(next(sh for sh in model["shards"] if sh["path"] == s)["tensors"],
                                    gguf.GGUFReader(s), failures, f"split shard {os.path.basename(s)}")

# A missing shard is an error naming the missing file.
partial = os.path.join(work, "split_partial")
os.makedirs(partial)
for s in shards[:2]:
    shutil.copy(s, partial)
rc, model = run_check(checker, "gguf-model", os.path.join(partial, os.path.basename(shards[0])))
failures.check(rc == 1 and "model-00003-of-00003.gguf" in model.get("message", ""),
               f"split: missing shard message {model.get('message')!r}")
# A shard renamed out of its set cannot find its siblings.
lonely = os.path.join(work, "lonely.gguf")
shutil.copy(shards[1], lonely)
rc, model = run_check(checker, "gguf-model", lonely)
failures.check(rc == 1 and "-NNNNN-of-NNNNN.gguf" in model.get("message", ""),
               f"split: renamed shard message {model.get('message')!r}")

# 5. Big-endian GGUF: refused with a message saying so.
be = os.path.join(work, "big_endian.gguf")
write_gguf(be, kvs[:3], [("w", rng.normal(size=(4, 32)).astype(np.float32), None)],
           endianess=gguf.GGUFEndian.BIG)
rc, ours_be = run_check(checker, "gguf", be)
failures.check(rc == 1 and ours_be["code"] == "unsupported" and "big-endian" in ours_be["message"],
               f"big-endian: {ours_be.get('message')!r}")

failures.finish("gguf_oracle")
