"""UQFF export directories written per spec/uqff.md by uqff_writer.py (numpy + safetensors), read back through
inspect-model: every family tag, stacked experts, biases, fallbacks, multi-shard sets, several sets in one
directory, residual tensors and assets; and the reader rules (versions, duplicates, legacy files, bad layers).
Expected values come from gguf-py (GGML blocks) and the independent numpy model of the spec (other families).

usage: test_uqff.py <inspect-model> <work dir>"""
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as T
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "formats"))
import spec_model  # noqa: E402
from uqff_writer import (Layer, afq_layer, f8q8_layer, fp8_layer, ggml_layer, hqq_layer, mxfp4_layer,  # noqa: E402
                         unquant_layer, u8, u32, write_assets, write_shards)

TOOL, WORK = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(20261121)
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}: {detail}")


def inspect(path, *args):
    return subprocess.run([TOOL, path, *args], capture_output=True, text=True)


def gauss(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def k_blocks(rows, cols, block_bytes):
    """Random Q4_K bytes with a finite, modest f16 d and dmin in each 256-element super-block."""
    raw = rng.integers(0, 256, size=(rows, cols // 256, block_bytes), dtype=np.uint8)
    raw[:, :, 0:2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)
    raw[:, :, 2:4] = np.frombuffer(np.float16(0.002).tobytes(), np.uint8)
    return raw.reshape(rows, -1)


def model_layers():
    L = []
    # GGML family (tag 0): a legacy block type, a K-quant from raw bytes, a stacked expert tensor, the F32 fallback.
    x = gauss(8, 64)
    q = gguf.quants.quantize(x, T.Q4_0)
    L.append(ggml_layer("model.layers.0.self_attn.q_proj", 2, [8, 64], q.tobytes(), gguf.quants.dequantize(q, T.Q4_0)))
    kq = k_blocks(4, 256, 144)
    L.append(ggml_layer("model.layers.0.self_attn.k_proj", 12, [4, 256], kq.tobytes(), gguf.quants.dequantize(kq, T.Q4_K)))
    xe = gauss(2 * 4, 64)
    qe = gguf.quants.quantize(xe, T.Q8_0)
    L.append(ggml_layer("model.layers.0.mlp.experts.gate_proj", 8, [2, 4, 64], qe.tobytes(),
                        gguf.quants.dequantize(qe, T.Q8_0).reshape(2, 4, 64)))
    xf = gauss(3, 7)
    L.append(ggml_layer("model.layers.0.mlp.router", 0, [3, 7], xf.tobytes(), xf))
    # Unquant (tag 1) with a bias.
    wu = gauss(5, 65).astype(np.float16)
    lu = unquant_layer("model.layers.0.self_attn.o_proj", wu)
    lu.entries["model.layers.0.self_attn.o_proj.bias"] = gauss(5)
    L.append(lu)
    # HQQ4 (tag 2).
    xh = gauss(8, 64)
    ph = spec_model.quantize("hqq4", xh, group=64, scale_type="F32")
    L.append(hqq_layer("model.layers.0.mlp.up_proj", 4, 64, [8, 64], ph,
                       spec_model.dequantize("hqq4", ph, 8, 64, group=64, scale_type="F32")))
    # FP8 per tensor (tag 3).
    x8 = gauss(4, 32)
    d8, _, _ = spec_model.quantize("fp8", x8, global_scale=0.0125)
    L.append(fp8_layer("model.layers.0.mlp.down_proj", [4, 32], d8, 0.0125,
                       spec_model.dequantize("fp8", (d8, b"", b""), 4, 32, global_scale=0.0125)))
    # AFQ (tag 4): 4-bit F16 scales, 3-bit straddling words, and a stacked expert tensor.
    for key, bits, group, shape in (("model.layers.1.self_attn.q_proj", 4, 64, [8, 128]),
                                    ("model.layers.1.self_attn.k_proj", 3, 32, [4, 64]),
                                    ("model.layers.1.mlp.experts.up_proj", 4, 32, [2, 4, 64])):
        rows = int(np.prod(shape[:-1]))
        xa = gauss(rows, shape[-1])
        pa = spec_model.quantize(f"afq{bits}", xa, group=group, scale_type="F16")
        want = spec_model.dequantize(f"afq{bits}", pa, rows, shape[-1], group=group, scale_type="F16")
        L.append(afq_layer(key, bits, group, shape, pa, "F16", want.reshape(shape)))
    # F8Q8 (tag 5): blocks straddle rows (40 columns).
    xq = gauss(3, 40)
    pq, _, _ = spec_model.quantize("f8q8", xq)
    L.append(f8q8_layer("model.layers.1.mlp.gate_proj", [3, 40], pq,
                        spec_model.dequantize("f8q8", (pq, b"", b""), 3, 40)))
    # MXFP4 (tag 6), with a bias.
    xm = gauss(4, 64)
    pm = spec_model.quantize("mxfp4", xm)
    lm = mxfp4_layer("model.layers.1.mlp.down_proj", [4, 64], pm, spec_model.dequantize("mxfp4", pm, 4, 64))
    lm.entries["model.layers.1.mlp.down_proj.bias"] = gauss(4)
    L.append(lm)
    return L


def residual():
    return {"model.norm.weight": gauss(64), "model.layers.0.input_layernorm.weight": gauss(64),
            "model.embed_tokens.weight": gauss(16, 64).astype(np.float16)}


CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64}


def test_round_trip():
    d = os.path.join(WORK, "export")
    layers = model_layers()
    write_shards(d, "q4k", layers, layers_per_shard=4)  # three shards
    write_assets(d, residual(), CONFIG, tokenizer_json='{"model": {"type": "BPE"}}')
    r = inspect(d, "--json")
    check("open export", r.returncode == 0, r.stderr)
    if r.returncode != 0:
        return
    info = json.loads(r.stdout)
    check("source kind", info["source"] == "uqff", info["source"])
    check("architecture", info.get("architecture") == "LlamaForCausalLM", info.get("architecture"))
    check("tokenizer asset", info["tokenizer"]["tokenizer_json"] is True)
    by_name = {t["name"]: t for t in info["tensors"]}
    want_formats = {"model.layers.0.self_attn.q_proj.weight": "q4_0", "model.layers.0.self_attn.k_proj.weight": "q4_k",
                    "model.layers.0.mlp.experts.gate_proj.weight": "q8_0", "model.layers.0.mlp.router.weight": "f32",
                    "model.layers.0.self_attn.o_proj.weight": "f16", "model.layers.0.mlp.up_proj.weight": "hqq4",
                    "model.layers.0.mlp.down_proj.weight": "fp8", "model.layers.1.self_attn.q_proj.weight": "afq4",
                    "model.layers.1.self_attn.k_proj.weight": "afq3", "model.layers.1.mlp.experts.up_proj.weight": "afq4",
                    "model.layers.1.mlp.gate_proj.weight": "f8q8", "model.layers.1.mlp.down_proj.weight": "mxfp4",
                    "model.layers.0.self_attn.o_proj.bias": "f32", "model.layers.1.mlp.down_proj.bias": "f32",
                    "model.norm.weight": "f32", "model.embed_tokens.weight": "f16"}
    for name, fmt in want_formats.items():
        got = by_name.get(name, {}).get("format")
        check(f"format of {name}", got == fmt, f"got {got}, want {fmt}")
    check("tensor count", len(info["tensors"]) == len(want_formats) + 1, len(info["tensors"]))
    for layer in layers:
        name = layer.key + ".weight"
        want = np.asarray(layer.expected, np.float32)
        check(f"shape of {name}", by_name.get(name, {}).get("shape") == list(want.shape),
              f"{by_name.get(name, {}).get('shape')} vs {list(want.shape)}")
        out = os.path.join(WORK, "dump.f32")
        r = inspect(d, "--dump", name, "--out", out)
        if r.returncode != 0:
            check(f"dump {name}", False, r.stderr)
            continue
        got = np.fromfile(out, dtype=np.float32).reshape(want.shape)
        # Every family decodes with the same float32 expression as its reference: exact equality.
        bad = np.flatnonzero(~((got == want) | (np.isnan(got) & np.isnan(want))))
        check(f"values of {name}", bad.size == 0,
              f"{bad.size} mismatches, first at {bad[:1]}: {got.flat[bad[0]] if bad.size else ''} vs "
              f"{want.flat[bad[0]] if bad.size else ''}")


def test_set_selection():
    d = os.path.join(WORK, "multi")
    x = gauss(4, 64)
    q = gguf.quants.quantize(x, T.Q8_0)
    a = [ggml_layer("lm_head", 8, [4, 64], q.tobytes(), None)]
    pa = spec_model.quantize("afq4", x, group=64, scale_type="F32")
    b = [afq_layer("lm_head", 4, 64, [4, 64], pa, "F32", None)]
    write_shards(d, "q8_0", a)
    write_shards(d, "afq4", b)
    write_assets(d, {"model.norm.weight": gauss(64)}, CONFIG)
    r = inspect(d)
    check("several sets need a choice", r.returncode != 0 and "several UQFF shard sets" in r.stderr and
          "afq4" in r.stderr and "q8_0" in r.stderr, r.stderr)
    for sel, fmt in (("afq4", "afq4"), ("q8_0", "q8_0"), ("afq4-0.uqff", "afq4")):
        r = inspect(os.path.join(d, sel), "--json")
        ok = r.returncode == 0 and {t["name"]: t["format"] for t in json.loads(r.stdout)["tensors"]}["lm_head.weight"] == fmt
        check(f"select {sel}", ok, r.stderr)
    r = inspect(os.path.join(d, "q4k"))
    check("unknown set named", r.returncode != 0 and "no UQFF shard set 'q4k'" in r.stderr, r.stderr)
    # The report, when present, maps quant names to shard lists.
    with open(os.path.join(d, "uqff_report.json"), "w") as f:
        json.dump({"schema": 1, "outputs": [{"quant": "Q8_0", "shards": ["q8_0-0.uqff"]},
                                            {"quant": "AFQ4", "shards": ["afq4-0.uqff"]}]}, f)
    r = inspect(os.path.join(d, "afq4"), "--json")
    check("select through the report", r.returncode == 0, r.stderr)


def expect_error(name, build, phrase):
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    build(d)
    if not os.path.exists(os.path.join(d, "residual.safetensors")):
        write_assets(d, {"model.norm.weight": gauss(8)}, CONFIG)
    r = inspect(d)
    check(f"rejects {name}", r.returncode != 0 and phrase in r.stderr and r.stderr.startswith("error: "),
          f"rc={r.returncode} stderr={r.stderr.strip()!r} (wanted {phrase!r})")


def small_layer(key="lm_head"):
    x = gauss(2, 32)
    q = gguf.quants.quantize(x, T.Q8_0)
    return ggml_layer(key, 8, [2, 32], q.tobytes(), None)


def test_reader_rules():
    expect_error("no-version", lambda d: write_shards(d, "m", [small_layer()], version=None), "no version tag")
    expect_error("major-2", lambda d: write_shards(d, "m", [small_layer()], version=(2, 0, 0)), "incompatible")
    expect_error("newer-minor", lambda d: write_shards(d, "m", [small_layer()], version=(1, 3, 0)), "newer mistral.rs")
    expect_error("conflicting-version",
                 lambda d: (write_shards(d, "m", [small_layer("a"), small_layer("b")], layers_per_shard=1,
                                         version_in_every_shard=True),
                            write_shards(d, "tmp", [small_layer("c")], version=(1, 1, 0)),
                            os.replace(os.path.join(d, "tmp-0.uqff"), os.path.join(d, "m-1.uqff"))),
                 "conflicting UQFF version")
    expect_error("duplicate-key", lambda d: write_shards(d, "m", [small_layer("a"), small_layer("a")],
                                                         layers_per_shard=1), "duplicate tensor key")

    def legacy(d):
        os.makedirs(d, exist_ok=True)
        from safetensors.numpy import save_file
        save_file({"0": np.zeros(8, np.uint8) + 1, "1": np.zeros(4, np.uint8) + 2}, os.path.join(d, "m-0.uqff"))
    expect_error("legacy", legacy, "regenerate it with `mistralrs quantize`")

    def wrong_bytes(d):
        lay = small_layer()
        lay.entries["lm_head.weight"] = lay.entries["lm_head.weight"][:-3]
        write_shards(d, "m", [lay])
    expect_error("truncated-layer", wrong_bytes, "expected 68")

    def overflowing_shape(d):
        # 2 · 536903681 · 536838145 · 32 = 2^64 + 64: a wrapped element count would match 2 rows of Q8_0 blocks.
        write_shards(d, "m", [ggml_layer("lm_head", 8, [2, 536903681, 536838145, 32], bytes(68), None)])
    expect_error("overflowing-shape", overflowing_shape, "more than 2^63 elements")

    def fork_tag(d):
        lay = small_layer()
        lay.entries["lm_head.weight.format"] = u8(7)
        write_shards(d, "m", [lay])
    expect_error("fork-tag", fork_tag, "format tag 7")

    def stacked_hqq(d):
        xh = gauss(2 * 4, 64)
        ph = spec_model.quantize("hqq4", xh, group=64, scale_type="F32")
        write_shards(d, "m", [hqq_layer("experts.up_proj", 4, 64, [2, 4, 64], ph, None)])
    expect_error("stacked-hqq", stacked_hqq, "stacked experts")

    def missing_entry(d):
        lay = small_layer()
        del lay.entries["lm_head.weight.shape"]
        write_shards(d, "m", [lay])
    expect_error("missing-shape", missing_entry, "missing entry 'lm_head.weight.shape'")

    def no_residual(d):
        write_shards(d, "m", [small_layer()])
        with open(os.path.join(d, "config.json"), "w") as f:
            f.write("{}")
        open(os.path.join(d, "residual.safetensors.missing"), "w").close()
    d = os.path.join(WORK, "no-residual")
    shutil.rmtree(d, ignore_errors=True)
    no_residual(d)
    r = inspect(d)
    check("rejects missing residual", r.returncode != 0 and "residual.safetensors" in r.stderr, r.stderr)


if __name__ == "__main__":
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    test_round_trip()
    test_set_selection()
    test_reader_rules()
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
