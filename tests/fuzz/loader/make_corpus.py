"""Seed corpus for the loader fuzzers: small GGUF files from gguf-py's GGUFWriter and safetensors files from the
safetensors package (the same kinds of fixtures the oracle tests use), plus the first bytes of the real files.

usage: make_corpus.py <gguf|safetensors> <out dir>
"""
import os
import sys

kind, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as Q, GGUFValueType as V, quants
    from safetensors.numpy import save_file
except ImportError as e:
    print(f"no seeds: {e}")
    sys.exit(0)

rng = np.random.default_rng(1)
HEAD_BYTES = 16384


def write_gguf(name, kvs=(), tensors=(), alignment=None, endianess=gguf.GGUFEndian.LITTLE, split_max_tensors=0):
    w = gguf.GGUFWriter(os.path.join(out, name), arch="llama", endianess=endianess,
                        split_max_tensors=split_max_tensors)
    if alignment:
        w.add_custom_alignment(alignment)
    for key, val, vtype, sub in kvs:
        w.add_key_value(key, val, vtype, sub_type=sub)
    for tname, data, raw in tensors:
        w.add_tensor(tname, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def real_heads(names):
    data = os.environ.get("QRT_TEST_DATA", "")
    for rel in names:
        path = os.path.join(data, rel)
        if data and os.path.exists(path):
            with open(path, "rb") as f:
                head = f.read(HEAD_BYTES)
            with open(os.path.join(out, "head-" + os.path.basename(rel)), "wb") as f:
                f.write(head)


if kind == "gguf":
    kvs = [("a.u8", 7, V.UINT8, None), ("a.i16", -3, V.INT16, None), ("a.u32", 70000, V.UINT32, None),
           ("a.f32", 0.5, V.FLOAT32, None), ("a.bool", True, V.BOOL, None), ("a.str", "hi", V.STRING, None),
           ("a.u64", 2**40, V.UINT64, None), ("a.i64", -2**40, V.INT64, None), ("a.f64", 0.25, V.FLOAT64, None),
           ("a.arr", ["x", "yz"], V.ARRAY, V.STRING), ("a.farr", [1.0, 2.0], V.ARRAY, V.FLOAT32),
           ("a.nested", [[1, 2], [3]], V.ARRAY, None)]
    x = rng.normal(size=(4, 64)).astype(np.float32)
    tensors = [("w.f32", x[:, :8], None), ("w.f16", x.astype(np.float16), None),
               ("w.q8_0", quants.quantize(x, Q.Q8_0), Q.Q8_0), ("w.q4_0", quants.quantize(x, Q.Q4_0), Q.Q4_0),
               ("w.q4_k", rng.integers(0, 255, size=(2, 144), dtype=np.uint8), Q.Q4_K),
               ("w.i32", np.arange(6, dtype=np.int32), None)]
    write_gguf("all.gguf", kvs, tensors)
    write_gguf("aligned.gguf", kvs[:3], tensors[:2], alignment=64)
    write_gguf("vocab.gguf", kvs)
    write_gguf("be.gguf", kvs[:3], tensors[:1], endianess=gguf.GGUFEndian.BIG)
    write_gguf("split.gguf", kvs[:2], tensors[:3], split_max_tensors=1)
    real_heads(["stories260K/stories260K.gguf", "ggml-vocab/ggml-vocab-gpt-2.gguf"])
else:
    arrays = {"a": rng.normal(size=(3, 5)).astype(np.float32), "b": rng.normal(size=(4,)).astype(np.float16),
              "c": np.arange(3, dtype=np.int64), "d": np.array(1.5, dtype=np.float64),
              "e": np.zeros((0, 2), dtype=np.uint8), "f": np.array([True, False])}
    save_file(arrays, os.path.join(out, "all.safetensors"), metadata={"format": "pt", "k": "v"})
    save_file({"w": arrays["a"]}, os.path.join(out, "one.safetensors"))
    real_heads(["stories260K-hf/model.safetensors"])
print(f"{len(os.listdir(out))} seeds in {out}")
