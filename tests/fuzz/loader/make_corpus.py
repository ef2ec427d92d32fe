"""Seed corpus for the loader fuzzers: small GGUF files from gguf-py's GGUFWriter, safetensors files from the
safetensors package and UQFF shards from the oracle tests' UQFF writer (tests/oracle/uqff/uqff_writer.py), plus the
first bytes of the real files.

usage: make_corpus.py <gguf|safetensors|uqff> <out dir>
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


UQFF_SHARD_SEPARATOR = b"\n--uqff-shard--\n"  # as in uqff_fuzzer.cpp


def uqff_layers():
    """One small layer per UQFF family (spec/uqff.md §2.6) with random payloads of the right sizes."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "oracle", "uqff"))
    import uqff_writer as uw

    def raw(n):
        return rng.integers(0, 256, size=n, dtype=np.uint8).tobytes()

    def floats(n, dtype):
        return (rng.random(n) * 0.1 + 0.01).astype(dtype).tobytes()

    x = rng.normal(size=(2, 32)).astype(np.float32)
    layers = [
        uw.ggml_layer("model.layers.0.self_attn.q_proj", 8, [2, 32], quants.quantize(x, Q.Q8_0).tobytes(), None),
        uw.ggml_layer("model.layers.0.self_attn.k_proj", 12, [1, 256], raw(144), None),
        uw.ggml_layer("model.layers.0.mlp.router", 0, [2, 3], floats(6, np.float32), None),
        uw.ggml_layer("model.layers.0.mlp.experts.gate_proj", 2, [2, 2, 32], raw(4 * 18), None),
        uw.unquant_layer("model.layers.0.self_attn.o_proj", rng.normal(size=(3, 5)).astype(np.float16)),
        uw.hqq_layer("model.layers.0.mlp.up_proj", 4, 64, [2, 64], (raw(64), floats(2, np.float32),
                                                                     floats(2, np.float32)), None),
        uw.fp8_layer("model.layers.0.mlp.down_proj", [2, 16], raw(32), 0.0125, None),
        uw.afq_layer("model.layers.1.self_attn.q_proj", 4, 32, [2, 64], (raw(64), floats(4, np.float16),
                                                                          floats(4, np.float16)), "F16", None),
        uw.afq_layer("model.layers.1.self_attn.k_proj", 3, 32, [2, 64], (raw(48), floats(4, np.float32),
                                                                          floats(4, np.float32)), "F32", None),
        uw.afq_layer("model.layers.1.mlp.experts.up_proj", 4, 32, [2, 2, 32], (raw(64), floats(4, np.float16),
                                                                                floats(4, np.float16)), "F16", None),
        uw.f8q8_layer("model.layers.1.mlp.gate_proj", [3, 40], raw(33 * 4), None),
        uw.mxfp4_layer("model.layers.1.mlp.down_proj", [2, 64], (raw(64), raw(4), b""), None),
    ]
    layers[4].entries["model.layers.0.self_attn.o_proj.bias"] = rng.normal(size=3).astype(np.float32)
    layers[11].entries["model.layers.1.mlp.down_proj.bias"] = rng.normal(size=2).astype(np.float32)
    return uw, layers


def write_uqff_seeds():
    import tempfile
    uw, layers = uqff_layers()

    def raw_q8(rows):
        return quants.quantize(rng.normal(size=(rows, 32)).astype(np.float32), Q.Q8_0).tobytes()

    def seed(name, shard_layers, **kw):
        with tempfile.TemporaryDirectory() as tmp:
            paths = uw.write_shards(tmp, "m", shard_layers, **kw)
            blobs = []
            for p in paths:
                with open(p, "rb") as f:
                    blobs.append(f.read())
        with open(os.path.join(out, name), "wb") as f:
            f.write(UQFF_SHARD_SEPARATOR.join(blobs))

    seed("all-families.uqff", layers, layers_per_shard=len(layers))
    seed("three-shards.uqff", layers, layers_per_shard=4)
    seed("versions-everywhere.uqff", layers[:4], layers_per_shard=2, version_in_every_shard=True)
    seed("version-1.0.uqff", layers[:2], version=(1, 0, 0))
    seed("newer-minor.uqff", layers[:1], version=(1, 3, 0))
    seed("no-version.uqff", layers[:1], version=None)
    # 2 · 536903681 · 536838145 · 32 = 2^64 + 64 elements: refused, never wrapped to 2 rows of Q8_0.
    seed("overflowing-shape.uqff", [uw.ggml_layer("lm_head", 8, [2, 536903681, 536838145, 32], raw_q8(2), None)])
    with tempfile.TemporaryDirectory() as tmp:  # a pre-1.0 file: numeric entry names
        save_file({"0": np.arange(8, dtype=np.uint8), "1": np.arange(4, dtype=np.uint8)}, os.path.join(tmp, "l"))
        with open(os.path.join(tmp, "l"), "rb") as f, open(os.path.join(out, "legacy.uqff"), "wb") as g:
            g.write(f.read())


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
elif kind == "uqff":
    write_uqff_seeds()
else:
    arrays = {"a": rng.normal(size=(3, 5)).astype(np.float32), "b": rng.normal(size=(4,)).astype(np.float16),
              "c": np.arange(3, dtype=np.int64), "d": np.array(1.5, dtype=np.float64),
              "e": np.zeros((0, 2), dtype=np.uint8), "f": np.array([True, False])}
    save_file(arrays, os.path.join(out, "all.safetensors"), metadata={"format": "pt", "k": "v"})
    save_file({"w": arrays["a"]}, os.path.join(out, "one.safetensors"))
    real_heads(["stories260K-hf/model.safetensors"])
print(f"{len(os.listdir(out))} seeds in {out}")
