#!/usr/bin/env python3
"""quantize-model and convert-model with an importance matrix (llama-imatrix's output), end to end:

  * the same importance written in both of llama.cpp's file formats (GGUF with in_sum2 / counts, written here by
    gguf-py; the legacy .dat with ncall-scaled values) gives byte-identical GGUF models;
  * a weighted matrix in the GGUF (IQ2_XXS, read by gguf-py) holds exactly the bytes qrt_quant_oracle makes from
    the source rows and the entry's importance, the quantizer test_recorded_quants.py holds to ggml's bytes; the
    weighted error it minimizes is below that of the same type quantized with uniform importance, and gguf-py's
    decode of it is near the source;
  * IQ2_XXS without --imatrix is refused naming --imatrix; token_embd (which llama-imatrix never sees) falls back
    to Q2_K and is reported; an entry of the wrong size, an imatrix of another model and a truncated file are
    refused naming the tensor or the file;
  * a UQFF export in q4k: each module's blocks equal the weighted quantizer's, and differ from the unweighted
    export; a MoE expert stack takes each expert's own slice of the importance;
  * convert-model GGUF -> GGUF --requantize with --imatrix weighs the requantized tensors the same way.

usage: test_imatrix.py <quantize-model> <convert-model> <qrt_quant_oracle> <work dir>
"""
import json
import os
import shutil
import struct
import subprocess
import sys

try:
    import numpy as np
    from gguf import GGUFReader, GGUFWriter, GGMLQuantizationType
    from gguf import quants
    from safetensors.numpy import save_file
except ImportError as e:  # pragma: no cover
    print("skipped: missing python module:", e)
    sys.exit(77)

QUANTIZE, CONVERT, ORACLE, WORK = sys.argv[1:5]
DATA = os.environ.get("QRT_TEST_DATA", "")
STORIES = os.path.join(DATA, "stories260K-hf")  # a 512-token SentencePiece-style tokenizer: small embeddings
if not os.path.isdir(STORIES):
    print(f"skipped: tokenizer test data not found under QRT_TEST_DATA={DATA!r}")
    sys.exit(77)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "model"))
from test_model_forward import base_config, make_weights  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "..", "e2e"))
from e2e_checks import check, finish  # noqa: E402


def run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


def checkpoint(name, cfg, seed, tokenizer=True):
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    W = make_weights(cfg, np.random.default_rng(seed))
    save_file(W, os.path.join(d, "model.safetensors"))
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    if tokenizer:
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(STORIES, f), os.path.join(d, f))
    return d, W


def importance_for(names_cols, rng):
    """{GGUF name: [experts, cols] importance}, log-normal like real mean squared activations."""
    return {n: np.exp(rng.normal(0.0, 1.5, (e, c))).astype(np.float32) for n, (e, c) in names_cols.items()}


def write_gguf_imatrix(path, imp, counts=7.0):
    w = GGUFWriter(path, "imatrix")
    w.add_string("general.type", "imatrix")
    w.add_array("imatrix.datasets", ["calibration.txt"])
    w.add_uint32("imatrix.chunk_count", 12)
    w.add_uint32("imatrix.chunk_size", 512)
    for name, v in imp.items():
        n = np.full((v.shape[0], 1), counts, np.float32)
        w.add_tensor(name + ".in_sum2", (v.astype(np.float64) * counts).astype(np.float32))
        w.add_tensor(name + ".counts", n)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    # in_sum2 / counts must give back v for the byte comparisons below: keep what the file really holds.
    return {n: ((v.astype(np.float64) * counts).astype(np.float32) / np.float32(counts)) for n, v in imp.items()}


def write_legacy_imatrix(path, imp, ncall=3):
    with open(path, "wb") as f:
        f.write(struct.pack("<i", len(imp)))
        for name, v in imp.items():
            f.write(struct.pack("<i", len(name)) + name.encode())
            f.write(struct.pack("<ii", ncall, v.size))
            f.write((v.reshape(-1) * np.float32(ncall)).astype(np.float32).tobytes())
        f.write(struct.pack("<i", 12) + struct.pack("<i", 15) + b"calibration.txt")


def oracle_quantize(fmt, x, importance=None):
    src, out, imp = (os.path.join(WORK, n) for n in ("oq.f32", "oq.bin", "oq_imp.f32"))
    x.astype(np.float32).tofile(src)
    args = [ORACLE, "quantize", fmt, str(x.shape[0]), str(x.shape[1]), src, out]
    if importance is not None:
        importance.astype(np.float32).tofile(imp)
        args.append(imp)
    r = run(args)
    assert r.returncode == 0, r.stderr
    return np.fromfile(out, np.uint8)


def gguf_tensor(path, name):
    for t in GGUFReader(path).tensors:
        if t.name == name:
            return t
    raise KeyError(name)


def read_uqff(directory):
    entries = {}
    for shard in sorted(f for f in os.listdir(directory) if f.endswith(".uqff")):
        with open(os.path.join(directory, shard), "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
            data = f.read()
        header.pop("__metadata__", None)
        for name, e in header.items():
            b, end = e["data_offsets"]
            entries[name] = data[b:end]
    return entries


os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(11)

# ---- GGUF, IQ2_XXS: both file formats, the weighted bytes, the refusals -------------------------------------------
cfg = base_config("llama", vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=1,
                  num_attention_heads=4, num_key_value_heads=2, bos_token_id=1, eos_token_id=2)
src, W = checkpoint("llama256", cfg, 3)
layer = {"attn_q": 256, "attn_k": 256, "attn_v": 256, "attn_output": 256, "ffn_gate": 256, "ffn_up": 256,
         "ffn_down": 512}
imp = importance_for({f"blk.0.{k}.weight": (1, c) for k, c in layer.items()}, rng)
gguf_imatrix, dat_imatrix = os.path.join(WORK, "m.imatrix.gguf"), os.path.join(WORK, "m.imatrix.dat")
stored = write_gguf_imatrix(gguf_imatrix, imp)
write_legacy_imatrix(dat_imatrix, imp)

a, b = os.path.join(WORK, "a.gguf"), os.path.join(WORK, "b.gguf")
for path, m in ((a, gguf_imatrix), (b, dat_imatrix)):
    if os.path.exists(path):
        os.remove(path)
    r = run([QUANTIZE, src, "-o", path, "--type", "iq2_xxs", "--imatrix", m, "--threads", "2"])
    check(f"quantize-model iq2_xxs with {os.path.basename(m)}", r.returncode == 0, r.stderr[-600:])
check("token_embd, absent from the imatrix, falls back to q2k and is reported",
      any(line.strip().startswith("token_embd.weight:") and "importance" in line and line.endswith("q2k")
          for line in r.stderr.splitlines()), r.stderr[-600:])
if os.path.exists(a) and os.path.exists(b):
    ta, tb = GGUFReader(a).tensors, GGUFReader(b).tensors
    check("the GGUF and legacy imatrix files give identical tensors",
          [(t.name, t.tensor_type, bytes(t.data)) for t in ta] == [(t.name, t.tensor_type, bytes(t.data)) for t in tb])
    down = gguf_tensor(a, "blk.0.ffn_down.weight")
    check("ffn_down is IQ2_XXS", down.tensor_type == GGMLQuantizationType.IQ2_XXS, down.tensor_type)
    src_down = W["model.layers.0.mlp.down_proj.weight"]
    weighted = oracle_quantize("iq2_xxs", src_down, stored["blk.0.ffn_down.weight"][0])
    check("ffn_down holds the weighted quantizer's bytes for its importance",
          np.array_equal(np.asarray(down.data, np.uint8).reshape(-1), weighted))
    uniform = oracle_quantize("iq2_xxs", src_down, np.ones(512, np.float32))
    w = stored["blk.0.ffn_down.weight"][0].astype(np.float64)
    dec_w = quants.dequantize(weighted.reshape(src_down.shape[0], -1), GGMLQuantizationType.IQ2_XXS)
    dec_u = quants.dequantize(uniform.reshape(src_down.shape[0], -1), GGMLQuantizationType.IQ2_XXS)
    err_w = float(np.sum(w * (dec_w - src_down) ** 2))
    err_u = float(np.sum(w * (dec_u - src_down) ** 2))
    check(f"the importance-weighted error is lower with the imatrix ({err_w:.4g} < {err_u:.4g})", err_w < err_u)
    rel = float(np.linalg.norm(dec_w - src_down) / np.linalg.norm(src_down))
    check(f"gguf-py decodes ffn_down near the source (relative error {rel:.3f} < 0.5)", rel < 0.5)
    emb = gguf_tensor(a, "token_embd.weight")
    check("token_embd is Q2_K", emb.tensor_type == GGMLQuantizationType.Q2_K, emb.tensor_type)

bad = os.path.join(WORK, "bad.gguf")
r = run([QUANTIZE, src, "-o", bad, "--type", "iq2_xxs"])
check("iq2_xxs without an imatrix is refused naming --imatrix", r.returncode == 1 and "--imatrix" in r.stderr,
      r.stderr)
wrong = dict(imp)
wrong["blk.0.ffn_down.weight"] = imp["blk.0.ffn_down.weight"][:, :256]
write_legacy_imatrix(os.path.join(WORK, "wrong.dat"), wrong)
r = run([QUANTIZE, src, "-o", bad, "--type", "q4_k", "--imatrix", os.path.join(WORK, "wrong.dat")])
check("an entry of the wrong size is refused naming the tensor",
      r.returncode == 1 and "blk.0.ffn_down.weight" in r.stderr and "256 values" in r.stderr, r.stderr)
other = {"blk.7.attn_q.weight": imp["blk.0.attn_q.weight"]}
write_legacy_imatrix(os.path.join(WORK, "other.dat"), other)
r = run([QUANTIZE, src, "-o", bad, "--type", "q4_k", "--imatrix", os.path.join(WORK, "other.dat")])
check("an imatrix of another model is refused", r.returncode == 1 and "no importance for any" in r.stderr, r.stderr)
raw = open(dat_imatrix, "rb").read()
open(os.path.join(WORK, "cut.dat"), "wb").write(raw[:100])
r = run([QUANTIZE, src, "-o", bad, "--type", "q4_k", "--imatrix", os.path.join(WORK, "cut.dat")])
check("a truncated imatrix is refused naming the file",
      r.returncode == 1 and "cut.dat" in r.stderr and "truncated" in r.stderr, r.stderr)
check("refused runs write nothing", not os.path.exists(bad))

# ---- UQFF q4k: dense modules and a MoE stack -----------------------------------------------------------------------
moe = base_config("mixtral", hidden_size=256, intermediate_size=256, num_hidden_layers=1, num_local_experts=4,
                  num_experts_per_tok=2, sliding_window=None)
msrc, MW = checkpoint("mixtral256", moe, 5, tokenizer=False)
mimp = importance_for({"blk.0.attn_q.weight": (1, 256), "blk.0.ffn_down_exps.weight": (4, 256),
                       "blk.0.ffn_gate_exps.weight": (4, 256)}, rng)
mstored = write_gguf_imatrix(os.path.join(WORK, "moe.imatrix.gguf"), mimp)
outs = {}
for label, extra in (("weighted", ["--imatrix", os.path.join(WORK, "moe.imatrix.gguf")]), ("plain", [])):
    d = os.path.join(WORK, "moe-" + label)
    shutil.rmtree(d, ignore_errors=True)
    r = run([QUANTIZE, msrc, "-o", d, "--type", "q4k", "--force"] + extra)
    check(f"quantize-model q4k UQFF ({label})", r.returncode == 0, r.stderr[-600:])
    outs[label] = read_uqff(d) if r.returncode == 0 else {}
if outs["weighted"] and outs["plain"]:
    q = MW["model.layers.0.self_attn.q_proj.weight"]
    got = np.frombuffer(outs["weighted"]["model.layers.0.self_attn.q_proj.weight"], np.uint8)
    check("q_proj holds the weighted Q4_K bytes", np.array_equal(got, oracle_quantize("q4_k", q,
                                                                                       mstored["blk.0.attn_q.weight"][0])))
    check("and differs from the unweighted export",
          not np.array_equal(got, np.frombuffer(outs["plain"]["model.layers.0.self_attn.q_proj.weight"], np.uint8)))
    down = np.stack([MW[f"model.layers.0.block_sparse_moe.experts.{e}.w2.weight"] for e in range(4)])
    key = [k for k in outs["weighted"] if "experts" in k and ("w2" in k or "down" in k) and k.endswith(".weight")]
    check("the export has one stacked down-projection module", len(key) == 1, key)
    if len(key) == 1:
        got = np.frombuffer(outs["weighted"][key[0]], np.uint8).reshape(4, -1)
        want = [oracle_quantize("q4_k", down[e], mstored["blk.0.ffn_down_exps.weight"][e]) for e in range(4)]
        check("each expert is quantized with its own slice of the importance",
              all(np.array_equal(got[e], want[e]) for e in range(4)))
    up = "model.layers.0.block_sparse_moe.experts.up_proj.weight"
    check("the up projections (no entry) stay unweighted",
          up in outs["plain"] and outs["weighted"].get(up) == outs["plain"][up], sorted(outs["plain"])[:8])

# ---- convert-model --requantize --imatrix ------------------------------------------------------------------------
f16 = os.path.join(WORK, "src-iq4nl.gguf")
if os.path.exists(f16):
    os.remove(f16)
r = run([QUANTIZE, src, "-o", f16, "--type", "iq4_nl", "--no-promote"])
check("an IQ4_NL GGUF to convert", r.returncode == 0, r.stderr[-400:])
conv = os.path.join(WORK, "conv")
shutil.rmtree(conv, ignore_errors=True)
r = run([CONVERT, f16, "-o", conv, "--requantize", "q4k", "--imatrix", gguf_imatrix])
check("convert-model GGUF -> UQFF --requantize q4k --imatrix", r.returncode == 0, r.stderr[-600:])
if r.returncode == 0:
    t = gguf_tensor(f16, "blk.0.ffn_down.weight")
    values = quants.dequantize(np.asarray(t.data), GGMLQuantizationType.IQ4_NL).reshape(256, 512)
    got = np.frombuffer(read_uqff(conv)["model.layers.0.mlp.down_proj.weight"], np.uint8)
    check("the requantized down projection holds the weighted Q4_K bytes of the GGUF's values",
          np.array_equal(got, oracle_quantize("q4_k", values, stored["blk.0.ffn_down.weight"][0])))
r = run([CONVERT, f16, "-o", os.path.join(WORK, "conv2"), "--imatrix", gguf_imatrix])
check("--imatrix without --requantize is refused", r.returncode == 1 and "--requantize" in r.stderr, r.stderr)

finish()
