"""Ollama model stores written per spec/ollama.md (manifests, config blobs, content-addressed blobs) with numpy,
the `safetensors` package and gguf-py, read back through inspect-model: a GGUF-backed model, a tensor-blob model
(int4/int8 affine, nvfp4 with a global scale, mxfp4, mxfp8, a stacked expert blob, dense tensors, an MLX-style
unpadded header with null metadata), --verify, and malformed stores.

usage: test_ollama_store.py <inspect-model> <work dir>"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys

try:
    import numpy as np
    import gguf
    from safetensors.numpy import save_file
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "formats"))
import spec_model  # noqa: E402

TOOL, WORK = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(7)
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}: {detail}")


def inspect(root, name, *args):
    env = dict(os.environ, OLLAMA_MODELS=root)
    return subprocess.run([TOOL, name, *args], capture_output=True, text=True, env=env)


class Store:
    def __init__(self, root):
        self.root = root
        os.makedirs(os.path.join(root, "blobs"), exist_ok=True)

    def blob(self, data):
        h = hashlib.sha256(data).hexdigest()
        with open(os.path.join(self.root, "blobs", f"sha256-{h}"), "wb") as f:
            f.write(data)
        return {"digest": f"sha256:{h}", "size": len(data)}

    def manifest(self, rel, config, layers):
        cfg = self.blob(json.dumps(config).encode())
        m = {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
             "config": {"mediaType": "application/vnd.docker.container.image.v1+json", **cfg}, "layers": layers}
        path = os.path.join(self.root, "manifests", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(m, f)


def st_bytes(tensors, metadata=None):
    tmp = os.path.join(WORK, "tmp.safetensors")
    save_file(tensors, tmp, metadata=metadata)
    with open(tmp, "rb") as f:
        return f.read()


def mlx_style_bytes(tensors):
    """The MLX writer: header keys sorted, no padding, "__metadata__": null."""
    header, blobs, off = {"__metadata__": None}, [], 0
    for name in sorted(tensors):
        a = tensors[name]
        dt = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.uint32): "U32",
              np.dtype(np.uint8): "U8"}[a.dtype]
        raw = a.tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def layer(media, blob, name=None):
    d = {"mediaType": f"application/vnd.ollama.image.{media}", **blob}
    if name:
        d["name"] = name
    return d


def quantized(name, fmt, rows, cols, group, scale_type="F16", global_scale=1.0):
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    parts = spec_model.quantize(fmt, x, group=group, scale_type=scale_type, global_scale=global_scale)
    want = spec_model.dequantize(fmt, parts, rows, cols, group=group, scale_type=scale_type, global_scale=global_scale)
    data, scales, biases = parts
    t = {name: np.frombuffer(data, np.uint32).reshape(rows, -1).copy()}
    if fmt.startswith("afq"):
        t[name + ".scale"] = np.frombuffer(scales, np.float16).reshape(rows, -1).copy()
        t[name + ".bias"] = np.frombuffer(biases, np.float16).reshape(rows, -1).copy()
    else:
        t[name + ".scale"] = np.frombuffer(scales, np.uint8).reshape(rows, -1).copy()
    if fmt == "nvfp4" and global_scale != 1.0:
        t[name + ".global_scale"] = np.array([global_scale], np.float32)
    return t, want


def tensor_model(store):
    expected, layers = {}, []
    specs = [("model.layers.0.self_attn.q_proj.weight", "afq4", 64, {"quant_type": "int4", "group_size": "64"}),
             ("model.layers.0.self_attn.k_proj.weight", "afq8", 64, {"quant_type": "int8", "group_size": "64"}),
             ("model.layers.0.mlp.up_proj.weight", "mxfp4", 32, {"quant_type": "mxfp4", "group_size": "32"}),
             ("model.layers.0.mlp.gate_proj.weight", "mxfp8", 32, {"quant_type": "mxfp8", "group_size": "32"}),
             ("model.layers.0.mlp.down_proj.weight", "nvfp4", 16, {"quant_type": "nvfp4", "group_size": "16"}),
             # no metadata: group and type inferred from shapes (int4, group 32)
             ("model.layers.0.self_attn.o_proj.weight", "afq4", 32, None)]
    for name, fmt, group, meta in specs:
        t, want = quantized(name, fmt, 8, 128, group, global_scale=0.5 if fmt == "nvfp4" else 1.0)
        expected[name] = (fmt, want)
        layers.append(layer("tensor", store.blob(st_bytes(t, meta)), name))
    # A packed expert blob: two projections stacked [E, out, in], one blob, per-tensor metadata keys.
    xs = rng.standard_normal((2 * 4, 64)).astype(np.float32)
    pa = spec_model.quantize("afq4", xs, group=64, scale_type="F16")
    wa = spec_model.dequantize("afq4", pa, 8, 64, group=64, scale_type="F16").reshape(2, 4, 64)
    gate = "model.layers.1.mlp.experts.gate_proj.weight"
    t = {gate: np.frombuffer(pa[0], np.uint32).reshape(2, 4, 8).copy(),
         gate + ".scale": np.frombuffer(pa[1], np.float16).reshape(2, 4, 1).copy(),
         gate + ".bias": np.frombuffer(pa[2], np.float16).reshape(2, 4, 1).copy()}
    expected[gate] = ("afq4", wa)
    layers.append(layer("tensor", store.blob(st_bytes(t, {f"{gate}.quant_type": "INT4", f"{gate}.group_size": "64"})),
                        "model.layers.1.mlp.experts"))
    # Dense tensors through the MLX writer's unpadded header, plus a layer bias that is NOT a quantization bias.
    norm = rng.standard_normal(64).astype(np.float32)
    bias = rng.standard_normal(8).astype(np.float16)
    layers.append(layer("tensor", store.blob(mlx_style_bytes({"model.norm.weight": norm,
                                                              "model.layers.0.self_attn.q_proj.bias": bias})),
                        "model.norm.weight"))
    expected["model.norm.weight"] = ("f32", norm)
    expected["model.layers.0.self_attn.q_proj.bias"] = ("f16", bias.astype(np.float32))
    layers.append(layer("json", store.blob(json.dumps({"architectures": ["Qwen3ForCausalLM"]}).encode()), "config.json"))
    layers.append(layer("json", store.blob(b'{"model":{"type":"BPE"}}'), "tokenizer.json"))
    store.manifest("registry.ollama.ai/library/tiny/nvfp4",
                   {"model_format": "safetensors", "file_type": "nvfp4", "architecture": "qwen3"}, layers)
    return expected


def gguf_model(store):
    path = os.path.join(WORK, "m.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(1)
    x = rng.standard_normal((4, 32)).astype(np.float32)
    w.add_tensor("blk.0.attn_q.weight", x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(path, "rb") as f:
        data = f.read()
    store.manifest("registry.ollama.ai/library/ggufmodel/latest", {"model_format": "gguf", "file_type": "F32"},
                   [layer("model", store.blob(data)), layer("template", store.blob(b"{{ .Prompt }}"))])
    return x


def dump(root, name, tensor, shape):
    out = os.path.join(WORK, "dump.f32")
    r = inspect(root, name, "--dump", tensor, "--out", out)
    if r.returncode != 0:
        return None, r.stderr
    return np.fromfile(out, np.float32).reshape(shape), ""


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    root = os.path.join(WORK, "store")
    store = Store(root)
    expected = tensor_model(store)
    x = gguf_model(store)

    r = inspect(root, "tiny:nvfp4", "--json")
    check("open tensor model", r.returncode == 0, r.stderr)
    if r.returncode == 0:
        info = json.loads(r.stdout)
        check("kind", info["source"] == "ollama", info["source"])
        check("architecture from config.json", info.get("architecture") == "Qwen3ForCausalLM", info.get("architecture"))
        formats = {t["name"]: t["format"] for t in info["tensors"]}
        check("tensor count", len(formats) == len(expected), sorted(formats))
        for name, (fmt, want) in expected.items():
            check(f"format {name}", formats.get(name) == fmt, f"{formats.get(name)} vs {fmt}")
            got, err = dump(root, "tiny:nvfp4", name, want.shape)
            if got is None:
                check(f"dump {name}", False, err)
                continue
            check(f"values {name}", np.array_equal(got, want.astype(np.float32)),
                  f"max diff {np.max(np.abs(got - want))}")
    r = inspect(root, "tiny:nvfp4", "--verify")
    check("verify intact store", r.returncode == 0, r.stderr)

    r = inspect(root, "ggufmodel")
    check("open GGUF-backed model", r.returncode == 0 and "gguf" not in r.stderr, r.stderr)
    got, err = dump(root, "ggufmodel:latest", "blk.0.attn_q.weight", x.shape)
    check("GGUF blob values", got is not None and np.array_equal(got, x), err)

    # Corrupt one blob: --verify names it; without --verify the model still opens (the bytes are valid safetensors).
    blobs = sorted(os.listdir(os.path.join(root, "blobs")))
    victim = None
    for b in blobs:
        p = os.path.join(root, "blobs", b)
        with open(p, "rb") as f:
            data = f.read()
        if data.startswith(b"GGUF"):
            victim = p
            with open(p, "r+b") as f:
                f.seek(len(data) - 1)
                f.write(bytes([data[-1] ^ 0xFF]))
    r = inspect(root, "ggufmodel", "--verify")
    check("verify detects corruption", r.returncode != 0 and "corrupt" in r.stderr and os.path.basename(victim) in r.stderr,
          r.stderr)

    for name, phrase in (("missing:1b", "no manifest"), ("Bad Name", "not an Ollama model name")):
        r = inspect(root, name)
        check(f"error for {name}", r.returncode != 0 and phrase in r.stderr, r.stderr)
    # A quantized tensor whose packed width contradicts its scales.
    t, _ = quantized("w", "afq4", 4, 64, 64)
    t["w.scale"] = t["w.scale"][:, :0].copy() if False else np.concatenate([t["w.scale"]] * 2, axis=1)
    t["w.bias"] = np.concatenate([t["w.bias"]] * 2, axis=1)
    store.manifest("registry.ollama.ai/library/bad/latest", {"model_format": "safetensors"},
                   [layer("tensor", store.blob(st_bytes(t, {"quant_type": "int4", "group_size": "64"})), "w"),
                    layer("json", store.blob(b"{}"), "config.json")])
    r = inspect(root, "bad")
    check("inconsistent quantized tensor", r.returncode != 0 and "do not match" in r.stderr, r.stderr)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


main()
