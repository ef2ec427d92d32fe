#!/usr/bin/env python3
"""quantize-model to GGUF, checked against llama.cpp's own files and qrt's forward pass:

  * a random llama checkpoint with GPT-2's real tokenizer.json, quantized to one GGUF file: its tokenizer metadata,
    read by gguf-py, equals that of llama.cpp's ggml-vocab-gpt-2.gguf (model, pre-tokenizer, every token, token
    type and merge, BOS/EOS ids); qrt, loading the file, tokenizes llama.cpp's 47 test strings to the ids llama.cpp
    recorded for that vocabulary;
  * the architecture keys and tensors: qrt's forward pass on the GGUF (Q/K rows permuted, interleaved RoPE) gives
    the logits of the Hugging Face source quantized the same way in memory, and reads the same config but for the
    RoPE layout; K-quant rows that do not fit fall back and are reported; an existing file needs --force; a
    WordPiece tokenizer and a non-GGML type are refused (SentencePiece-style ones: test_spm_tokenizer.py);
  * Llama 3 RoPE scaling: a rope_freqs tensor equal to the llama3 rule's divisors, no scaling keys, and the logits
    of the scaled source (not those of the unscaled one); convert-model back to UQFF writes the rule's parameters
    into config.json again, with the same logits;
  * MXFP4: an MXFP4 export converted to GGUF holds the same values in GGUF's blocks (gguf-py's decoder against the
    spec's decode of the export), the same logits, and converts back to the export's bytes;
  * a GGUF in a type UQFF lacks (IQ4_NL) is refused by tensor name, or with --requantize q8_0 converted with the
    modules listed as fallbacks, progress shown, and logits within Q8_0's error of the GGUF's.

and convert-model, from a UQFF export of the same checkpoint to GGUF: every block copied unchanged (the down
projection byte for byte, Q and K with their rows reordered head by head), the same logits as the export read by
qrt, and an AFQ export refused by tensor name; then back from that GGUF to UQFF: every module's blocks equal the
first export's, the logits too, and the tokenizer.json written from the GGUF vocabulary tokenizes llama.cpp's test
strings to its recorded ids, in qrt and in Hugging Face's `tokenizers`.

Phi-3 (fused qkv_proj / gate_up_proj, LongRoPE factors, a sliding window; stories260K's SentencePiece tokenizer):
quantize-model to GGUF q8_0 writes llama.cpp's phi3 layout as test_model_forward.py builds it (gguf-py reads the
same tensor names and shapes, attn_qkv, the fused ffn_up, rope_factors_long/short equal to config.json's, and the
same metadata values: original context, attn_factor, window) and qrt's logits on it equal the source quantized in
memory; convert-model to UQFF writes Phi3Config's rope_scaling and the fused modules, and back to GGUF gives every
tensor's bytes and the logits again; a quantize-model phi3 UQFF export converts to GGUF with its blocks copied;
LongRoPE on a llama model is refused for GGUF.

usage: test_quantize_gguf.py <quantize-model> <qrt_model_forward> <libruntime.so> <python dir> <work dir>
                             <convert-model>
"""
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    from gguf import GGUFReader
    from safetensors import safe_open
    from safetensors.numpy import save_file
except ImportError as e:  # pragma: no cover
    print("skipped: missing python module:", e)
    sys.exit(77)

QUANTIZE, FORWARD, LIB, PYDIR, WORK, CONVERT = sys.argv[1:7]
DATA = os.environ.get("QRT_TEST_DATA", "")
GPT2 = os.path.join(DATA, "tokenizers", "gpt2")
VOCAB = os.path.join(DATA, "ggml-vocab", "ggml-vocab-gpt-2.gguf")
if not (os.path.isdir(GPT2) and os.path.isfile(VOCAB)):
    print(f"skipped: tokenizer test data not found under QRT_TEST_DATA={DATA!r}")
    sys.exit(77)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "model"))
from test_model_forward import CASES, base_config, gguf_metadata, make_weights, to_gguf_layout  # noqa: E402

os.environ["QRT_LIBRARY"] = LIB
sys.path.insert(0, PYDIR)
import qrt  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "e2e"))
from e2e_checks import check, finish  # noqa: E402
from gguf_fields import field  # noqa: E402


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kw)


os.makedirs(WORK, exist_ok=True)
cfg = base_config("llama", vocab_size=50257, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  bos_token_id=50256, eos_token_id=50256)
src = os.path.join(WORK, "gpt2-llama")
shutil.rmtree(src, ignore_errors=True)
os.makedirs(src)
save_file(make_weights(cfg, np.random.default_rng(5)), os.path.join(src, "model.safetensors"))
json.dump(cfg, open(os.path.join(src, "config.json"), "w"))
for name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(os.path.join(GPT2, name), os.path.join(src, name))
out = os.path.join(WORK, "model-q8_0.gguf")
if os.path.exists(out):
    os.remove(out)
r = run([QUANTIZE, src, "-o", out, "--type", "q8_0"])
check("quantize-model to .gguf", r.returncode == 0 and os.path.isfile(out), r.stderr)

if r.returncode == 0:
    ours, ref = GGUFReader(out), GGUFReader(VOCAB)
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"):
        a, b = field(ours, key), field(ref, key)
        check(f"{key} equals llama.cpp's", a == b, (a if not isinstance(a, list) else len(a),
                                                    b if not isinstance(b, list) else len(b)))
    check("architecture", field(ours, "general.architecture") == "llama" and
          field(ours, "llama.block_count") == 2 and field(ours, "llama.attention.head_count_kv") == 2)
    # qrt loads the file and tokenizes llama.cpp's test strings to the recorded ids.
    model = qrt.Model(out)
    texts = open(VOCAB + ".inp", encoding="utf-8").read().split("\n__ggml_vocab_test__\n")
    want = [[int(t) for t in line.split()] for line in open(VOCAB + ".out").read().split("\n")]
    bad = [(t, model.tokenize(t, add_special=False), w) for t, w in zip(texts, want)
           if model.tokenize(t, add_special=False) != w]
    check(f"qrt tokenizes {len(texts)} strings as llama.cpp does", not bad and len(texts) >= 40, bad[:3])
    # The forward pass: equal to the source quantized in memory.
    tokens = "5,99,1000,50256,7"
    a, b = os.path.join(WORK, "gguf.f32"), os.path.join(WORK, "hf.f32")
    ra = run([FORWARD, "--model", out, "--tokens", tokens, "--logits", a, "--print-config", a + ".json"])
    rb = run([FORWARD, "--weights", os.path.join(src, "model.safetensors"), "--hf-config",
              os.path.join(src, "config.json"), "--format", "q8_0", "--tokens", tokens, "--logits", b,
              "--print-config", b + ".json"])
    check("qrt_model_forward on both", ra.returncode == 0 and rb.returncode == 0, ra.stderr + rb.stderr)
    if ra.returncode == 0 and rb.returncode == 0:
        la, lb = np.fromfile(a, np.float32), np.fromfile(b, np.float32)
        err = float(np.max(np.abs(la - lb)) / np.max(np.abs(lb)))
        check(f"GGUF logits equal the source's quantized in memory ({err:.2e})", la.shape == lb.shape and err < 1e-5)
        ca, cb = json.load(open(a + ".json")), json.load(open(b + ".json"))
        differ = {k for k in ca if ca[k] != cb.get(k)}
        check("the same config but the RoPE layout (Q/K permuted)", differ == {"rope_layout"} and
              ca["rope_layout"] == "interleaved", differ)
    again = run([QUANTIZE, src, "-o", out, "--type", "q8_0"])
    check("an existing file needs --force", again.returncode == 1 and "--force" in again.stderr, again.stderr)
    k = run([QUANTIZE, src, "-o", out, "--type", "q4k", "--force"])
    check("q4k: rows of 64 and 96 fall back to a 32-block type, reported", k.returncode == 0 and
          "needs rows of a multiple of 256" in k.stderr, k.stderr)

# ---- Llama 3 RoPE scaling: a rope_freqs tensor, as llama.cpp's converter writes it ------------------------------
# head_dim 16 at theta 10000 against an original context of 64: pair 0 keeps its frequency (wavelength 6.3 < 64 / 4),
# pairs 1 and 2 lie in the blended band, pairs 3..7 are interpolated by the factor.
l3cfg = dict(cfg, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
             max_position_embeddings=512)
l3src = os.path.join(WORK, "llama3-rope")
shutil.rmtree(l3src, ignore_errors=True)
shutil.copytree(src, l3src)
json.dump(l3cfg, open(os.path.join(l3src, "config.json"), "w"))
l3out = os.path.join(WORK, "llama3-q8_0.gguf")
if os.path.exists(l3out):
    os.remove(l3out)
r = run([QUANTIZE, l3src, "-o", l3out, "--type", "q8_0", "--quiet"])
check("quantize-model with Llama 3 RoPE scaling to .gguf", r.returncode == 0, r.stderr)
if r.returncode == 0:
    reader = GGUFReader(l3out)
    freqs = {t.name: t for t in reader.tensors}.get("rope_freqs.weight")
    # The divisors from the rule itself (transformers' llama3 rope init; llama.cpp stores 1 / its blend).
    rs, hd = l3cfg["rope_scaling"], l3cfg["hidden_size"] // l3cfg["num_attention_heads"]
    want = []
    for i in range(hd // 2):
        wavelength = 2 * np.pi * l3cfg["rope_theta"] ** (2 * i / hd)
        ctx = rs["original_max_position_embeddings"]
        if wavelength < ctx / rs["high_freq_factor"]:
            want.append(1.0)
        elif wavelength > ctx / rs["low_freq_factor"]:
            want.append(rs["factor"])
        else:
            smooth = (ctx / wavelength - rs["low_freq_factor"]) / (rs["high_freq_factor"] - rs["low_freq_factor"])
            want.append(1.0 / ((1 - smooth) / rs["factor"] + smooth))
    got = None if freqs is None else np.asarray(freqs.data, np.float32).ravel()
    check("rope_freqs: one divisor per rotary pair, F32, equal to the llama3 rule's",
          got is not None and got.shape == (hd // 2,) and np.allclose(got, np.float32(want), rtol=1e-6, atol=0) and
          1.0 < got[1] < 8.0 and got[0] == 1.0 and got[-1] == 8.0, (got, want))
    check("no rope scaling keys (the tensor carries it)",
          not any(k.startswith("llama.rope.scaling") for k in reader.fields))
    tokens = ",".join(str((37 * i + 11) % 50257) for i in range(40))  # positions up to 39: the rotations differ
    a, b, c = (os.path.join(WORK, n) for n in ("l3-gguf.f32", "l3-hf.f32", "l3-unscaled.f32"))
    ra = run([FORWARD, "--model", l3out, "--tokens", tokens, "--logits", a])
    rb = run([FORWARD, "--weights", os.path.join(l3src, "model.safetensors"), "--hf-config",
              os.path.join(l3src, "config.json"), "--format", "q8_0", "--tokens", tokens, "--logits", b])
    rc = run([FORWARD, "--weights", os.path.join(l3src, "model.safetensors"), "--hf-config",
              os.path.join(src, "config.json"), "--format", "q8_0", "--tokens", tokens, "--logits", c])
    check("qrt_model_forward on the Llama 3 GGUF and its source", ra.returncode == rb.returncode == rc.returncode == 0,
          ra.stderr + rb.stderr + rc.stderr)
    if ra.returncode == rb.returncode == rc.returncode == 0:
        la, lb, lc = (np.fromfile(x, np.float32) for x in (a, b, c))
        err = float(np.max(np.abs(la - lb)) / np.max(np.abs(lb)))
        unscaled = float(np.max(np.abs(lc - lb)) / np.max(np.abs(lb)))
        check(f"GGUF logits equal the scaled source's ({err:.2e}; without the scaling {unscaled:.2e})",
              err < 1e-4 and unscaled > 100 * max(err, 1e-6))
        # And back to UQFF: rope_freqs becomes config.json's rope_scaling again, with the same logits.
        l3back = os.path.join(WORK, "llama3-back-uqff")
        shutil.rmtree(l3back, ignore_errors=True)
        r = run([CONVERT, l3out, "-o", l3back])
        check("convert-model of the Llama 3 GGUF to UQFF", r.returncode == 0, r.stderr)
        if r.returncode == 0:
            rope = json.load(open(os.path.join(l3back, "config.json"))).get("rope_scaling", {})
            check("config.json's rope_scaling recovered from rope_freqs", rope.get("rope_type") == "llama3" and
                  {k: rope.get(k) for k in ("factor", "low_freq_factor", "high_freq_factor",
                                            "original_max_position_embeddings")} ==
                  {k: l3cfg["rope_scaling"][k] for k in ("factor", "low_freq_factor", "high_freq_factor",
                                                         "original_max_position_embeddings")}, rope)
            d = os.path.join(WORK, "l3-back.f32")
            rd = run([FORWARD, "--model", l3back, "--tokens", tokens, "--logits", d])
            check("qrt_model_forward on the UQFF", rd.returncode == 0, rd.stderr)
            if rd.returncode == 0:
                back_err = float(np.max(np.abs(np.fromfile(d, np.float32) - la)) / np.max(np.abs(la)))
                check(f"its logits equal the GGUF's ({back_err:.2e})", back_err < 1e-5)

# ---- convert-model: UQFF -> GGUF, blocks copied ----------------------------------------------------------------
uqff = os.path.join(WORK, "uqff")
shutil.rmtree(uqff, ignore_errors=True)
r = run([QUANTIZE, src, "-o", uqff, "--type", "q8_0", "--type", "afq4", "--quiet"])
check("UQFF export of the checkpoint", r.returncode == 0, r.stderr)
conv = os.path.join(WORK, "converted.gguf")
if os.path.exists(conv):
    os.remove(conv)
r = run([CONVERT, os.path.join(uqff, "q8_0"), "-o", conv])
check("convert-model UQFF q8_0 -> GGUF", r.returncode == 0 and os.path.isfile(conv), r.stderr)
if r.returncode == 0:
    from safetensors import safe_open
    g = {t.name: t for t in GGUFReader(conv).tensors}
    with safe_open(os.path.join(uqff, "q8_0-0.uqff"), "np") as f:
        down = f.get_tensor("model.layers.1.mlp.down_proj.weight").tobytes()
        q = f.get_tensor("model.layers.0.self_attn.q_proj.weight").tobytes()
    check("down projection bytes copied unchanged", bytes(g["blk.1.ffn_down.weight"].data.tobytes()) == down)
    heads, rows = cfg["num_attention_heads"], cfg["hidden_size"]
    per, row_bytes = rows // heads, len(q) // rows
    qr = np.frombuffer(q, np.uint8).reshape(rows, row_bytes)
    perm = np.empty_like(qr)
    for h in range(heads):
        for i in range(per):
            perm[h * per + (i % (per // 2)) * 2 + i // (per // 2)] = qr[h * per + i]
    check("Q rows reordered for interleaved RoPE, blocks unchanged",
          bytes(g["blk.0.attn_q.weight"].data.tobytes()) == perm.tobytes())
    a, b = os.path.join(WORK, "conv.f32"), os.path.join(WORK, "uqff.f32")
    ra = run([FORWARD, "--model", conv, "--tokens", "5,99,1000,50256,7", "--logits", a])
    rb = run([FORWARD, "--model", os.path.join(uqff, "q8_0"), "--tokens", "5,99,1000,50256,7", "--logits", b])
    check("qrt_model_forward on the GGUF and the UQFF", ra.returncode == 0 and rb.returncode == 0,
          ra.stderr + rb.stderr)
    if ra.returncode == 0 and rb.returncode == 0:
        la, lb = np.fromfile(a, np.float32), np.fromfile(b, np.float32)
        err = float(np.max(np.abs(la - lb)) / np.max(np.abs(lb)))
        check(f"converted GGUF logits equal the UQFF export's ({err:.2e})", err < 1e-5)
    # And back: GGUF -> UQFF gives the first export's blocks again, a tokenizer.json Hugging Face's `tokenizers`
    # reads and tokenizes as llama.cpp does, and the same logits.
    back = os.path.join(WORK, "back-uqff")
    shutil.rmtree(back, ignore_errors=True)
    r = run([CONVERT, conv, "-o", back])
    check("convert-model GGUF -> UQFF", r.returncode == 0 and os.path.isfile(os.path.join(back, "model-0.uqff")),
          r.stderr)
    if r.returncode == 0:
        with safe_open(os.path.join(uqff, "q8_0-0.uqff"), "np") as f0, \
                safe_open(os.path.join(back, "model-0.uqff"), "np") as f1:
            names0 = {n for n in f0.keys() if n.endswith(".weight")}
            same = [n for n in names0 if n in f1.keys() and np.array_equal(f0.get_tensor(n), f1.get_tensor(n))]
            check("every module's blocks come back unchanged", len(same) == len(names0) and names0,
                  sorted(names0 - set(same))[:5])
        rb2 = run([FORWARD, "--model", back, "--tokens", "5,99,1000,50256,7", "--logits", b + "2"])
        if rb2.returncode == 0:
            err = float(np.max(np.abs(np.fromfile(b + "2", np.float32) - lb)) / np.max(np.abs(lb)))
            check(f"the round trip's logits equal the first export's ({err:.2e})", err == 0.0)
        else:
            check("qrt_model_forward on the round trip", False, rb2.stderr)
        texts = open(VOCAB + ".inp", encoding="utf-8").read().split("\n__ggml_vocab_test__\n")
        want = [[int(t) for t in line.split()] for line in open(VOCAB + ".out").read().split("\n")]
        back_model = qrt.Model(back)
        bad = [t for t, w in zip(texts, want) if back_model.tokenize(t, add_special=False) != w]
        check("qrt tokenizes with the written tokenizer.json as llama.cpp does", not bad, bad[:3])
        try:
            from tokenizers import Tokenizer
            hf_tok = Tokenizer.from_file(os.path.join(back, "tokenizer.json"))
            bad = [t for t, w in zip(texts, want) if hf_tok.encode(t, add_special_tokens=False).ids != w]
            check("Hugging Face tokenizers reads the written tokenizer.json and agrees", not bad, bad[:3])
        except ImportError:
            print("skip: the tokenizers package is not installed")
r = run([CONVERT, os.path.join(uqff, "afq4"), "-o", os.path.join(WORK, "afq.gguf")])
check("an AFQ export refused by tensor name", r.returncode == 1 and "afq4, which has no GGUF type" in r.stderr and
      "blk." in r.stderr and "--requantize" in r.stderr and not os.path.exists(os.path.join(WORK, "afq.gguf")),
      r.stderr)
# --requantize: the AFQ layers decoded and quantized to Q8_0, everything else copied; the logits stay within Q8_0's
# error of the AFQ export's.
requant = os.path.join(WORK, "afq-requant.gguf")
if os.path.exists(requant):
    os.remove(requant)
r = run([CONVERT, os.path.join(uqff, "afq4"), "-o", requant, "--requantize", "q8_0"])
check("convert-model --requantize q8_0 of the AFQ export", r.returncode == 0 and "requantized blk.0.attn_q.weight: "
      "afq4 -> q8_0" in r.stderr, r.stderr)
if r.returncode == 0:
    types = {t.name: t.tensor_type.name for t in GGUFReader(requant).tensors}
    # ffn_down (rows of 96: not whole AFQ groups of 64) fell back to unquantized in the export: copied as F32.
    check("the AFQ layers are Q8_0 in the file; the unquantized down projection and the norms stay F32",
          types.get("blk.1.ffn_gate.weight") == "Q8_0" and types.get("blk.1.ffn_down.weight") == "F32" and
          types.get("blk.0.attn_norm.weight") == "F32", types)
    a, b = os.path.join(WORK, "requant.f32"), os.path.join(WORK, "afq.f32")
    ra = run([FORWARD, "--model", requant, "--tokens", "5,99,1000,50256,7", "--logits", a])
    rb = run([FORWARD, "--model", os.path.join(uqff, "afq4"), "--tokens", "5,99,1000,50256,7", "--logits", b])
    if ra.returncode == 0 and rb.returncode == 0:
        la, lb = np.fromfile(a, np.float32), np.fromfile(b, np.float32)
        err = float(np.max(np.abs(la - lb)) / np.max(np.abs(lb)))
        check(f"its logits are the AFQ export's within Q8_0's error ({err:.2e})", 0 < err < 3e-2)
    else:
        check("qrt_model_forward on the requantized GGUF and the AFQ export", False, ra.stderr + rb.stderr)
r = run([CONVERT, os.path.join(uqff, "afq4"), "-o", os.path.join(WORK, "x.gguf"), "--requantize", "afq4"])
check("--requantize to a type GGUF lacks refused", r.returncode == 1 and "not a GGML type" in r.stderr, r.stderr)

# ---- MXFP4: UQFF's layout <-> GGUF's blocks, repacked without re-quantizing --------------------------------------
mx = os.path.join(WORK, "uqff-mxfp4")
shutil.rmtree(mx, ignore_errors=True)
r = run([QUANTIZE, src, "-o", mx, "--type", "mxfp4", "--quiet"])
mx_gguf = os.path.join(WORK, "mxfp4.gguf")
if os.path.exists(mx_gguf):
    os.remove(mx_gguf)
r2 = run([CONVERT, os.path.join(mx, "mxfp4"), "-o", mx_gguf, "--quiet"]) if r.returncode == 0 else r
check("convert-model of an MXFP4 export to GGUF", r.returncode == 0 and r2.returncode == 0, r.stderr + r2.stderr)
if r2.returncode == 0:
    from gguf.quants import dequantize
    from safetensors import safe_open
    e2m1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)
    g = {t.name: t for t in GGUFReader(mx_gguf).tensors}
    with safe_open(os.path.join(mx, "mxfp4-0.uqff"), "np") as f:
        w = f.get_tensor("model.layers.1.mlp.down_proj.weight")
        e = f.get_tensor("model.layers.1.mlp.down_proj.weight.scales")
    codes = np.stack([w & 0xF, w >> 4], axis=-1).reshape(w.shape[0], -1)
    spec = e2m1[codes] * np.exp2(np.repeat(e.astype(np.float32) - 127, 32, axis=1))
    t = g["blk.1.ffn_down.weight"]
    ours = dequantize(t.data, t.tensor_type).reshape(spec.shape)
    check("GGUF MXFP4 blocks (gguf-py's decoder) hold the UQFF export's values (spec §3.3) exactly",
          t.tensor_type.name == "MXFP4" and np.array_equal(ours, spec), t.tensor_type.name)
    a, b = os.path.join(WORK, "mx-gguf.f32"), os.path.join(WORK, "mx-uqff.f32")
    ra = run([FORWARD, "--model", mx_gguf, "--tokens", "5,99,1000,50256,7", "--logits", a])
    rb = run([FORWARD, "--model", os.path.join(mx, "mxfp4"), "--tokens", "5,99,1000,50256,7", "--logits", b])
    if ra.returncode == 0 and rb.returncode == 0:
        err = float(np.max(np.abs(np.fromfile(a, np.float32) - np.fromfile(b, np.float32))))
        check(f"the GGUF's logits equal the MXFP4 export's ({err:.2e})", err == 0.0)
    else:
        check("qrt_model_forward on the MXFP4 GGUF and export", False, ra.stderr + rb.stderr)
    mx_back = os.path.join(WORK, "mxfp4-back")
    shutil.rmtree(mx_back, ignore_errors=True)
    r = run([CONVERT, mx_gguf, "-o", mx_back, "--quiet"])
    check("and back to UQFF", r.returncode == 0, r.stderr)
    if r.returncode == 0:
        with safe_open(os.path.join(mx, "mxfp4-0.uqff"), "np") as f0, \
                safe_open(os.path.join(mx_back, "model-0.uqff"), "np") as f1:
            keys = [k for k in f0.keys() if ".weight" in k]
            same = [k for k in keys if k in f1.keys() and np.array_equal(f0.get_tensor(k), f1.get_tensor(k))]
            check("every MXFP4 weight and scale tensor comes back byte for byte", len(same) == len(keys) and keys,
                  sorted(set(keys) - set(same))[:4])

# ---- GGUF in a type UQFF lacks (IQ4_NL) -> UQFF: refused by name, or requantized when asked, with progress ---------
iq = os.path.join(WORK, "iq4_nl.gguf")
if os.path.exists(iq):
    os.remove(iq)
r = run([QUANTIZE, src, "-o", iq, "--type", "iq4_nl", "--quiet"])
check("an IQ4_NL GGUF", r.returncode == 0, r.stderr)
if r.returncode == 0:
    iq_uqff = os.path.join(WORK, "iq-uqff")
    shutil.rmtree(iq_uqff, ignore_errors=True)
    r = run([CONVERT, iq, "-o", iq_uqff])
    check("GGUF -> UQFF refuses an i-quant by tensor name, pointing at --requantize",
          r.returncode == 1 and "iq4_nl, which UQFF's GGML family cannot hold" in r.stderr and
          "--requantize" in r.stderr and not os.path.exists(iq_uqff), r.stderr)
    r = run([CONVERT, iq, "-o", iq_uqff, "--requantize", "q8_0"], env=dict(os.environ, QRT_PROGRESS_AFTER="0"))
    check("--requantize q8_0 converts it, listing each requantized module and showing progress",
          r.returncode == 0 and "iq4_nl has no UQFF type: requantized to q8_0" in r.stderr and
          "converting" in r.stderr, r.stderr)
    if r.returncode == 0:
        report = json.load(open(os.path.join(iq_uqff, "uqff_report.json")))
        check("uqff_report.json lists them as fallbacks", any("requantized to q8_0" in f for o in report["outputs"]
                                                              for f in o.get("fallbacks", [])), report)
        a, b = os.path.join(WORK, "iq-gguf.f32"), os.path.join(WORK, "iq-uqff.f32")
        ra = run([FORWARD, "--model", iq, "--tokens", "5,99,1000,50256,7", "--logits", a])
        rb = run([FORWARD, "--model", iq_uqff, "--tokens", "5,99,1000,50256,7", "--logits", b])
        if ra.returncode == 0 and rb.returncode == 0:
            la, lb = np.fromfile(a, np.float32), np.fromfile(b, np.float32)
            err = float(np.max(np.abs(la - lb)) / np.max(np.abs(la)))
            check(f"its logits are the IQ4_NL GGUF's within Q8_0's error ({err:.2e})", 0 < err < 3e-2)
        else:
            check("qrt_model_forward on the IQ4_NL GGUF and its UQFF", False, ra.stderr + rb.stderr)
    r = run([CONVERT, iq, "-o", os.path.join(WORK, "iq-bad"), "--requantize", "iq4_nl"])
    check("--requantize to a type UQFF lacks refused", r.returncode == 1 and "not a type of UQFF's GGML family"
          in r.stderr, r.stderr)

# A tokenizer GGUF cannot describe: a WordPiece model.
wordpiece = os.path.join(WORK, "wordpiece-llama")
shutil.rmtree(wordpiece, ignore_errors=True)
shutil.copytree(src, wordpiece)
tj = json.load(open(os.path.join(wordpiece, "tokenizer.json")))
tj["model"] = {"type": "WordPiece", "vocab": {"[UNK]": 0, "a": 1}, "unk_token": "[UNK]"}
json.dump(tj, open(os.path.join(wordpiece, "tokenizer.json"), "w"))
for label, d, args, expect in (
        ("a UQFF-only type", src, ["--type", "afq4"], "not a GGML type"),
        ("a WordPiece tokenizer", wordpiece, ["--type", "q8_0"], "not BPE with a vocab")):
    bad_out = os.path.join(WORK, "refused.gguf")
    r = run([QUANTIZE, d, "-o", bad_out] + args)
    check(f"{label} refused", r.returncode == 1 and expect in r.stderr and not os.path.exists(bad_out) and
          not any(n.startswith("refused.gguf.qrt-staging") for n in os.listdir(WORK)), r.stderr)


# ---- Phi-3: fused projections, LongRoPE and a sliding window in llama.cpp's phi3 layout -------------------------
def logits_error(a, b):
    la, lb = np.fromfile(a, np.float32), np.fromfile(b, np.float32)
    return float(np.max(np.abs(la - lb)) / np.max(np.abs(lb))) if la.shape == lb.shape else float("inf")


def safe_keys(d):
    """Every tensor name in a UQFF export directory's shards and residual.safetensors."""
    keys = set()
    for name in os.listdir(d):
        if name.endswith(".uqff") or name == "residual.safetensors":
            with safe_open(os.path.join(d, name), "np") as f:
                keys |= set(f.keys())
    return keys


def uqff_formats(d):
    """UQFF layer key -> its format tag, over a directory's shards."""
    tags = {}
    for name in os.listdir(d):
        if name.endswith(".uqff"):
            with safe_open(os.path.join(d, name), "np") as f:
                for k in f.keys():
                    if k.endswith(".weight.format"):
                        tags[k[:-len(".weight.format")]] = int(f.get_tensor(k))
    return tags


def phi3_checks():
    stories = os.path.join(DATA, "stories260K-hf")  # a small SentencePiece-style tokenizer, as Phi-3's is
    if not os.path.isdir(stories):
        check("phi3: the stories260K-hf tokenizer under QRT_TEST_DATA", False, stories)
        return
    # head_dim 16: 8 rotary pairs; an original context of 8 within 64, so the long factors and a cos/sin factor of
    # sqrt(1 + ln 8 / ln 8); a window shorter than the 12 tokens run.
    pcfg = base_config("phi3", vocab_size=512, bos_token_id=1, eos_token_id=2, original_max_position_embeddings=8,
                       sliding_window=5, rope_scaling={
                           "type": "longrope", "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.6, 3.3, 4.0],
                           "long_factor": [1.0, 1.5, 2.5, 4.0, 6.0, 9.0, 14.0, 20.0]})
    psrc = os.path.join(WORK, "phi3-hf")
    shutil.rmtree(psrc, ignore_errors=True)
    os.makedirs(psrc)
    weights = make_weights(pcfg, np.random.default_rng(11))
    save_file(weights, os.path.join(psrc, "model.safetensors"))
    json.dump(pcfg, open(os.path.join(psrc, "config.json"), "w"))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(stories, name), os.path.join(psrc, name))
    # Only llama.cpp's phi3 reads the LongRoPE keys: the same scaling on a llama model is refused, not dropped.
    lsrc = os.path.join(WORK, "longrope-llama")
    shutil.rmtree(lsrc, ignore_errors=True)
    os.makedirs(lsrc)
    for name in ("model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        os.symlink(os.path.join(psrc, name), os.path.join(lsrc, name))
    json.dump(dict(pcfg, model_type="llama"), open(os.path.join(lsrc, "config.json"), "w"))
    r = run([QUANTIZE, lsrc, "-o", os.path.join(WORK, "longrope-llama.gguf"), "--type", "q8_0", "--quiet"])
    check("LongRoPE on a llama model refused for GGUF", r.returncode == 1 and
          "LongRoPE scaling is written to GGUF for phi3 models only, not llama" in r.stderr, r.stderr)
    pout = os.path.join(WORK, "phi3-q8_0.gguf")
    r = run([QUANTIZE, psrc, "-o", pout, "--type", "q8_0", "--quiet", "--force"])
    check("phi3: quantize-model to .gguf", r.returncode == 0, r.stderr)
    if r.returncode != 0:
        return
    # gguf-py reads the layout test_model_forward.py builds as llama.cpp's converter does: the same tensor names
    # and shapes (attn_qkv; ffn_up holding [gate; up]; the LongRoPE factors, F32) and its metadata values.
    reader = GGUFReader(pout)
    ours = {t.name: t for t in reader.tensors}
    want = to_gguf_layout(pcfg, weights)
    shapes = {n: list(t.shape.tolist())[::-1] for n, t in ours.items()}
    check("phi3: tensor names and shapes of llama.cpp's phi3 layout",
          shapes == {n: list(w.shape) for n, w in want.items()} and shapes["blk.1.ffn_up.weight"] == [192, 64] and
          ours["blk.1.attn_qkv.weight"].tensor_type.name == "Q8_0", (sorted(shapes), sorted(want)))
    for name in ("rope_factors_long.weight", "rope_factors_short.weight"):
        t = ours.get(name)
        check(f"phi3: {name} is F32 and holds config.json's factors", t is not None and
              t.tensor_type.name == "F32" and np.array_equal(np.asarray(t.data).ravel(), want[name]))
    md = gguf_metadata(pcfg, 0)
    differ = {k: (field(reader, k), v) for k, v in md.items()
              if (field(reader, k) != v if isinstance(v, str) else np.float32(field(reader, k) or 0) != np.float32(v))}
    check("phi3: metadata equal to llama.cpp's converter's (context, original context, attn_factor, window)",
          not differ and field(reader, "general.architecture") == "phi3" and
          "phi3.rope.scaling.type" not in reader.fields, differ)
    # qrt on the GGUF equals the source quantized in memory, with the same config.
    tokens = "1,5,99,300,7,42,511,3,250,17,88,123"
    a, b = os.path.join(WORK, "phi3-gguf.f32"), os.path.join(WORK, "phi3-hf.f32")
    ra = run([FORWARD, "--model", pout, "--tokens", tokens, "--logits", a, "--print-config", a + ".json"])
    rb = run([FORWARD, "--weights", os.path.join(psrc, "model.safetensors"), "--hf-config",
              os.path.join(psrc, "config.json"), "--format", "q8_0", "--tokens", tokens, "--logits", b,
              "--print-config", b + ".json"])
    check("phi3: qrt_model_forward on the GGUF and its source", ra.returncode == rb.returncode == 0,
          ra.stderr + rb.stderr)
    if ra.returncode != 0 or rb.returncode != 0:
        return
    err = logits_error(a, b)
    check(f"phi3: GGUF logits equal the source's quantized in memory ({err:.2e})", err < 1e-5)
    ca, cb = json.load(open(a + ".json")), json.load(open(b + ".json"))
    ca.pop("tensor_formats"), cb.pop("tensor_formats")  # GGUF and HF names for the same tensors
    check("phi3: the same config (LongRoPE, attn_factor, window, half-split RoPE)",
          ca == cb and ca["rope_scaling"] == 4 and ca["sliding_window"] == 5, (ca, cb))

    # GGUF -> UQFF: the fused tensors as mistral.rs' qkv_proj / gate_up_proj modules, the factors in config.json.
    from safetensors import safe_open
    pback = os.path.join(WORK, "phi3-back-uqff")
    shutil.rmtree(pback, ignore_errors=True)
    r = run([CONVERT, pout, "-o", pback, "--quiet"])
    check("phi3: convert-model GGUF -> UQFF", r.returncode == 0, r.stderr)
    if r.returncode != 0:
        return
    hf = json.load(open(os.path.join(pback, "config.json")))
    rope = hf.get("rope_scaling") or {}
    check("phi3: config.json with Phi3Config's LongRoPE fields and window",
          hf.get("model_type") == "phi3" and rope.get("type") == "longrope" and
          rope.get("short_factor") == pcfg["rope_scaling"]["short_factor"] and
          rope.get("long_factor") == pcfg["rope_scaling"]["long_factor"] and "attention_factor" not in rope and
          hf.get("original_max_position_embeddings") == 8 and hf.get("max_position_embeddings") == 64 and
          hf.get("sliding_window") == 5, hf)
    with safe_open(os.path.join(pback, "model-0.uqff"), "np") as f:
        modules = {n for n in f.keys() if n.endswith(".weight")}
        qkv = f.get_tensor("model.layers.0.self_attn.qkv_proj.weight").tobytes() if \
            "model.layers.0.self_attn.qkv_proj.weight" in modules else b""
    with safe_open(os.path.join(pback, "residual.safetensors"), "np") as f:
        residual = set(f.keys())
    check("phi3: qkv_proj and gate_up_proj modules, blocks copied; no factor tensors left over",
          "model.layers.1.mlp.gate_up_proj.weight" in modules and qkv == bytes(ours["blk.0.attn_qkv.weight"].data) and
          not {n.split(".")[-2] for n in modules} & {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"} and
          not any("rope" in n for n in residual), (sorted(modules), sorted(residual)))
    c = os.path.join(WORK, "phi3-back.f32")
    rc = run([FORWARD, "--model", pback, "--tokens", tokens, "--logits", c])
    check("phi3: the UQFF's logits equal the GGUF's", rc.returncode == 0 and logits_error(c, a) == 0.0, rc.stderr)
    # And back to GGUF: every tensor's bytes and the logits unchanged.
    pagain = os.path.join(WORK, "phi3-again.gguf")
    r = run([CONVERT, pback, "-o", pagain, "--quiet", "--force"])
    check("phi3: convert-model UQFF -> GGUF", r.returncode == 0, r.stderr)
    if r.returncode == 0:
        again = {t.name: t for t in GGUFReader(pagain).tensors}
        same = [n for n in ours if n in again and bytes(again[n].data) == bytes(ours[n].data)]
        check("phi3: the round trip gives every tensor's bytes back", len(same) == len(ours) == len(again),
              sorted(set(ours) ^ set(same))[:5])
        d = os.path.join(WORK, "phi3-again.f32")
        rd = run([FORWARD, "--model", pagain, "--tokens", tokens, "--logits", d])
        check("phi3: and the same logits", rd.returncode == 0 and logits_error(d, a) == 0.0, rd.stderr)

    # quantize-model's own phi3 UQFF export -> GGUF: the whole modules' blocks copied.
    pexp = os.path.join(WORK, "phi3-uqff")
    shutil.rmtree(pexp, ignore_errors=True)
    r = run([QUANTIZE, psrc, "-o", pexp, "--type", "q8_0", "--quiet"])
    pconv = os.path.join(WORK, "phi3-converted.gguf")
    r2 = run([CONVERT, os.path.join(pexp, "q8_0"), "-o", pconv, "--quiet", "--force"]) if r.returncode == 0 else r
    check("phi3: convert-model of a quantize-model UQFF export to GGUF", r2.returncode == 0, r.stderr + r2.stderr)
    if r2.returncode == 0:
        conv = {t.name: t for t in GGUFReader(pconv).tensors}
        with safe_open(os.path.join(pexp, "q8_0-0.uqff"), "np") as f:
            copied = all(bytes(conv[g].data) == f.get_tensor(u).tobytes() for g, u in (
                ("blk.1.attn_qkv.weight", "model.layers.1.self_attn.qkv_proj.weight"),
                ("blk.1.ffn_up.weight", "model.layers.1.mlp.gate_up_proj.weight")))
        check("phi3: qkv_proj and gate_up_proj copied as attn_qkv and ffn_up, with the factor tensors",
              copied and "rope_factors_long.weight" in conv and "blk.1.ffn_gate.weight" not in conv, sorted(conv))
        e, u = os.path.join(WORK, "phi3-conv.f32"), os.path.join(WORK, "phi3-uqff.f32")
        re_ = run([FORWARD, "--model", pconv, "--tokens", tokens, "--logits", e])
        ru = run([FORWARD, "--model", os.path.join(pexp, "q8_0"), "--tokens", tokens, "--logits", u])
        check("phi3: the converted GGUF's logits equal the export's", re_.returncode == ru.returncode == 0 and
              logits_error(e, u) == 0.0, re_.stderr + ru.stderr)




# ---- every architecture of the numpy oracle's cases, to GGUF and back ------------------------------------------
# Cases quantize-model does not write to GGUF, and the word its refusal names: a Gemma q·k scale llama.cpp would
# not derive from the file, a gpt-oss clamp other than llama.cpp's 7.
GGUF_REFUSED = {"gemma2_scalar_untied": "query_pre_attn_scalar", "gpt_oss": "swiglu_limit"}


def every_architecture_checks():
    """Each case of test_model_forward.py (biases, tied embeddings, linear / Llama 3 / YaRN RoPE, MQA, sliding
    windows, q/k norms, Mixtral and Qwen3-MoE experts, phi3), quantized to a q8_0 GGUF: qrt's logits on the file
    equal the source quantized to q8_0 in memory (routers stay F32 in GGUF, as in llama.cpp), and convert-model
    GGUF -> UQFF gives the same logits again, as does quantize-model's own UQFF export of the checkpoint."""
    stories = os.path.join(DATA, "stories260K-hf")
    if not os.path.isdir(stories):
        check("every architecture: the stories260K-hf tokenizer under QRT_TEST_DATA", False, stories)
        return
    tokens = "1,5,99,300,7,42,511,3,250,17,88"
    for case, base in CASES.items():
        cfg = dict(base, vocab_size=512, bos_token_id=1, eos_token_id=2)
        d = os.path.join(WORK, "arch-" + case)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        save_file(make_weights(cfg, np.random.default_rng(23)), os.path.join(d, "model.safetensors"))
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(stories, name), os.path.join(d, name))
        out = os.path.join(WORK, f"arch-{case}.gguf")
        r = run([QUANTIZE, d, "-o", out, "--type", "q8_0", "--quiet", "--force"])
        moe = cfg.get("num_local_experts", cfg.get("num_experts", cfg.get("n_routed_experts", 0))) > 0
        first_moe = cfg.get("first_k_dense_replace", 0)  # DeepSeek's leading dense layers have no router
        routers = [f"--tensor-format=blk.{i}.ffn_gate_inp=f32" for i in range(first_moe, cfg["num_hidden_layers"])
                   if moe]
        if cfg["model_type"] == "gpt_oss":  # expert biases stay F32 in GGUF, as every bias
            routers += [f"--tensor-format=blk.{i}.ffn_{p}_exps.bias=f32" for i in range(cfg["num_hidden_layers"])
                        for p in ("gate", "up", "down")]
        a, b, c = (os.path.join(WORK, f"arch-{case}.{k}.f32") for k in ("gguf", "hf", "uqff"))
        if case in GGUF_REFUSED:
            # What a GGUF cannot hold is refused, naming it; the UQFF export holds it.
            check(f"{case}: quantize-model to .gguf refuses, naming {GGUF_REFUSED[case]}",
                  r.returncode != 0 and GGUF_REFUSED[case] in r.stderr, r.stderr)
            uqff_export_check(case, cfg, d, tokens, routers, b, c)
            if case == "gpt_oss":
                # At llama.cpp's clamp the file is written, noting that GGUF readers truncate YaRN's fractional
                # correction range (this config keeps it), and runs.
                json.dump(dict(cfg, swiglu_limit=7.0), open(os.path.join(d, "config.json"), "w"))
                r = run([QUANTIZE, d, "-o", out, "--type", "q8_0", "--force"])
                ra = run([FORWARD, "--model", out, "--tokens", tokens, "--logits", a]) if r.returncode == 0 else r
                check(f"{case}: at a clamp of 7 the GGUF is written, noting the truncated YaRN range, and runs",
                      r.returncode == ra.returncode == 0 and "truncate" in r.stderr, r.stderr + ra.stderr)
            continue
        check(f"{case}: quantize-model to .gguf", r.returncode == 0, r.stderr)
        if r.returncode != 0:
            continue
        ra = run([FORWARD, "--model", out, "--tokens", tokens, "--logits", a])
        rb = run([FORWARD, "--weights", os.path.join(d, "model.safetensors"), "--hf-config",
                  os.path.join(d, "config.json"), "--format", "q8_0", "--tokens", tokens, "--logits", b] + routers)
        ok = ra.returncode == rb.returncode == 0
        check(f"{case}: logits of the GGUF and of its source", ok, ra.stderr + rb.stderr)
        if not ok:
            continue
        err = logits_error(a, b)
        check(f"{case}: GGUF logits equal the source's quantized in memory ({err:.2e})", err < 1e-5)
        back = os.path.join(WORK, f"arch-{case}-uqff")
        shutil.rmtree(back, ignore_errors=True)
        r = run([CONVERT, out, "-o", back, "--quiet"])
        rc = run([FORWARD, "--model", back, "--tokens", tokens, "--logits", c]) if r.returncode == 0 else r
        check(f"{case}: convert-model GGUF -> UQFF runs", r.returncode == rc.returncode == 0, r.stderr + rc.stderr)
        if r.returncode == rc.returncode == 0:
            err = logits_error(c, a)
            check(f"{case}: the UQFF export's logits equal the GGUF's ({err:.2e})", err < 1e-5)
            # Floats read from GGUF's f32 keys are written with the fewest digits that read back the same.
            written = json.load(open(os.path.join(back, "config.json")))
            check(f"{case}: config.json's rms_norm_eps and rope_theta as in the source ({written['rms_norm_eps']!r})",
                  written["rms_norm_eps"] == cfg["rms_norm_eps"] and written["rope_theta"] == cfg["rope_theta"])
            if cfg["model_type"] == "gpt_oss":
                # GptOssConfig's fields, with the YaRN range truncated as GGUF readers apply it (said explicitly:
                # mistral.rs' gpt-oss defaults to false); llama.cpp's file windows the even layers.
                types = ["sliding_attention" if i % 2 == 0 else "full_attention"
                         for i in range(cfg["num_hidden_layers"])]
                got = {k: written.get(k) for k in ("model_type", "num_local_experts", "num_experts_per_tok",
                                                   "intermediate_size", "swiglu_limit", "sliding_window",
                                                   "layer_types")}
                want = {"model_type": "gpt_oss", "num_local_experts": cfg["num_local_experts"],
                        "num_experts_per_tok": cfg["num_experts_per_tok"],
                        "intermediate_size": cfg["intermediate_size"], "swiglu_limit": 7.0,
                        "sliding_window": cfg["sliding_window"], "layer_types": types}
                check(f"{case}: config.json holds gpt-oss's fields", got == want and
                      written["rope_scaling"]["truncate"] is True, (got, written["rope_scaling"]))
                mlp = {k for k in safe_keys(back) if ".layers.0.mlp." in k or "sinks" in k}
                want_keys = {"model.layers.0.mlp.router.weight", "model.layers.0.mlp.router.bias",
                             "model.layers.0.self_attn.sinks", "model.layers.1.self_attn.sinks"}
                for proj in ("gate", "up", "down"):
                    want_keys |= {f"model.layers.0.mlp.experts.{proj}_proj.{x}"
                                  for x in ("weight", "bias", "weight.format", "weight.shape", "weight.dtype")}
                check(f"{case}: the export names gpt-oss's router and sinks as its checkpoints do, the experts as "
                      "stacked modules", mlp == want_keys, sorted(mlp ^ want_keys))
        uqff_export_check(case, cfg, d, tokens, routers, b, c)


def uqff_export_check(case, cfg, d, tokens, routers, b, c):
    """The checkpoint straight to a UQFF export (mistral.rs' layout, the embedding unquantized among the residual
    tensors) gives the source's logits with every tracked module in q8_0."""
    export = os.path.join(WORK, f"arch-{case}-export")
    # gpt-oss's fused expert parameters become the stacked expert modules, quantized like every other (their
    # biases, in `routers`, stay as they are).
    r = run([QUANTIZE, d, "-o", export, "--type", "q8_0", "--quiet", "--force"])
    rc = run([FORWARD, "--model", export, "--tokens", tokens, "--logits", c]) if r.returncode == 0 else r
    rb = run([FORWARD, "--weights", os.path.join(d, "model.safetensors"), "--hf-config",
              os.path.join(d, "config.json"), "--format", "q8_0", "--tokens", tokens, "--logits", b,
              "--tensor-format=token_embd=f32"] + routers)
    check(f"{case}: quantize-model to UQFF runs", r.returncode == rc.returncode == rb.returncode == 0,
          r.stderr + rc.stderr + rb.stderr)
    if r.returncode == rc.returncode == rb.returncode == 0:
        err = logits_error(c, b)
        check(f"{case}: the UQFF export's logits equal the source's quantized in memory ({err:.2e})", err < 1e-5)


def gpt_oss_mxfp4_checks():
    """openai's gpt-oss checkpoints hold the experts as MXFP4 _blocks/_scales: to GGUF they stay MXFP4 blocks (type 39,
    as llama.cpp's converter keeps them), the other matrices in q8_0; the file's logits equal the checkpoint's run with
    its experts as they are and the rest quantized in memory."""
    stories = os.path.join(DATA, "stories260K-hf")
    cfg = dict(CASES["gpt_oss_truncated"], vocab_size=512, bos_token_id=1, eos_token_id=2)
    rng = np.random.default_rng(31)
    W = make_weights(cfg, rng)
    E, F, H, layers = cfg["num_local_experts"], cfg["intermediate_size"], cfg["hidden_size"], cfg["num_hidden_layers"]
    for layer in range(layers):
        p = "model.layers.%d.mlp.experts." % layer
        for name, rows, cols in (("gate_up_proj", 2 * F, H), ("down_proj", H, F)):
            del W[p + name]
            W[p + name + "_blocks"] = rng.integers(0, 256, size=(E, rows, cols // 32, 16), dtype=np.uint8)
            W[p + name + "_scales"] = rng.integers(124, 129, size=(E, rows, cols // 32), dtype=np.uint8)
    d = os.path.join(WORK, "gpt-oss-mxfp4")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    save_file(W, os.path.join(d, "model.safetensors"))
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(stories, name), os.path.join(d, name))
    out = os.path.join(WORK, "gpt-oss-mxfp4.gguf")
    r = run([QUANTIZE, d, "-o", out, "--type", "q8_0", "--quiet", "--force"])
    check("gpt-oss MXFP4 checkpoint: quantize-model to .gguf", r.returncode == 0, r.stderr)
    if r.returncode != 0:
        return
    types = {t.name: int(t.tensor_type) for t in GGUFReader(out).tensors}
    check("gpt-oss MXFP4 checkpoint: the experts stay MXFP4 blocks in the GGUF, the projections q8_0",
          all(types["blk.%d.ffn_%s_exps.weight" % (i, x)] == 39 for i in range(layers) for x in ("gate", "up", "down"))
          and types["blk.0.attn_q.weight"] == 8, types)
    tokens = "1,5,99,300,7,42,511,3,250,17,88"
    a, b = (os.path.join(WORK, "gpt-oss-mxfp4.%s.f32" % k) for k in ("gguf", "hf"))
    keep = ["--tensor-format=blk.%d.ffn_%s_exps%s=%s" % (i, x, bias, "f32" if bias else "mxfp4")
            for i in range(layers) for x in ("gate", "up", "down") for bias in ("", ".bias")]
    keep += ["--tensor-format=blk.%d.ffn_gate_inp=f32" % i for i in range(layers)]
    ra = run([FORWARD, "--model", out, "--tokens", tokens, "--logits", a])
    rb = run([FORWARD, "--model", d, "--format", "q8_0", "--tokens", tokens, "--logits", b] + keep)
    ok = ra.returncode == rb.returncode == 0
    check("gpt-oss MXFP4 checkpoint: logits of the GGUF and of its source", ok, ra.stderr + rb.stderr)
    if ok:
        err = logits_error(a, b)
        check(f"gpt-oss MXFP4 checkpoint: GGUF logits equal the source's ({err:.2e})", err < 1e-5)
    # To UQFF, from the checkpoint (quantize-model) and from its GGUF (convert-model): the experts become stacked
    # MXFP4 layers (tag 6) with their blocks as they were, the projections q8_0.
    experts = {"model.layers.%d.mlp.experts.%s_proj" % (i, x) for i in range(layers) for x in ("gate", "up", "down")}
    export, conv = os.path.join(WORK, "gpt-oss-mxfp4-export"), os.path.join(WORK, "gpt-oss-mxfp4-uqff")
    for p in (export, conv):
        shutil.rmtree(p, ignore_errors=True)
    u, c, e = (os.path.join(WORK, "gpt-oss-mxfp4.%s.f32" % k) for k in ("export", "conv", "hf-embd"))
    r = run([QUANTIZE, d, "-o", export, "--type", "q8_0", "--quiet"])
    ru = run([FORWARD, "--model", export, "--tokens", tokens, "--logits", u]) if r.returncode == 0 else r
    re_ = run([FORWARD, "--model", d, "--format", "q8_0", "--tokens", tokens, "--logits", e,
               "--tensor-format=token_embd=f32"] + keep)
    ok = r.returncode == ru.returncode == re_.returncode == 0
    check("gpt-oss MXFP4 checkpoint: quantize-model to UQFF runs", ok, r.stderr + ru.stderr + re_.stderr)
    if ok:
        tags = uqff_formats(export)
        check("gpt-oss MXFP4 checkpoint: the export's experts are MXFP4 layers, q_proj GGML",
              all(tags.get(k) == 6 for k in experts) and tags.get("model.layers.0.self_attn.q_proj") == 0, tags)
        err = logits_error(u, e)
        check(f"gpt-oss MXFP4 checkpoint: the UQFF export's logits equal the source's ({err:.2e})", err < 1e-5)
    r = run([CONVERT, out, "-o", conv, "--quiet"])
    rc = run([FORWARD, "--model", conv, "--tokens", tokens, "--logits", c]) if r.returncode == 0 else r
    ok = r.returncode == rc.returncode == 0 and os.path.isfile(a)
    check("gpt-oss MXFP4 GGUF: convert-model to UQFF runs", ok, r.stderr + rc.stderr)
    if ok:
        tags = uqff_formats(conv)
        check("gpt-oss MXFP4 GGUF: GGUF type 39 experts become MXFP4 layers",
              all(tags.get(k) == 6 for k in experts), tags)
        err = logits_error(c, a)
        check(f"gpt-oss MXFP4 GGUF: the converted export's logits equal the GGUF's ({err:.2e})", err < 1e-5)


phi3_checks()
def deepseek_split_checks():
    """llama.cpp's current deepseek2 files split attn_kv_b into attn_k_b (transposed per head) and attn_v_b:
    the every-architecture GGUFs rewritten that way give the same logits, and convert-model turns them into a UQFF
    export (kv_b_proj rebuilt) with the same logits again."""
    from deepseek_split_gguf import split_kv_b
    tokens = "1,5,99,300,7,42,511,3,250,17,88"
    for case in ("deepseek_v2_lite", "deepseek_v3"):
        src = os.path.join(WORK, f"arch-{case}.gguf")
        if not os.path.isfile(src):
            check(f"{case}: the every-architecture GGUF to split", False, src)
            continue
        split = os.path.join(WORK, f"arch-{case}-split.gguf")
        split_kv_b(src, split)
        names = {t.name for t in GGUFReader(split).tensors}
        check(f"{case}: the split file holds attn_k_b / attn_v_b, not attn_kv_b",
              "blk.1.attn_k_b.weight" in names and "blk.1.attn_kv_b.weight" not in names, sorted(names))
        a, b, c = (os.path.join(WORK, f"arch-{case}-split.{k}.f32") for k in ("whole", "split", "uqff"))
        ra = run([FORWARD, "--model", src, "--tokens", tokens, "--logits", a])
        rb = run([FORWARD, "--model", split, "--tokens", tokens, "--logits", b])
        ok = ra.returncode == rb.returncode == 0
        check(f"{case}: the split GGUF runs", ok, ra.stderr + rb.stderr)
        if ok:
            err = logits_error(b, a)
            check(f"{case}: the split GGUF's logits equal the whole one's ({err:.2e})", err < 1e-5)
        back = os.path.join(WORK, f"arch-{case}-split-uqff")
        shutil.rmtree(back, ignore_errors=True)
        r = run([CONVERT, split, "-o", back, "--quiet"])
        rc = run([FORWARD, "--model", back, "--tokens", tokens, "--logits", c]) if r.returncode == 0 else r
        check(f"{case}: convert-model of the split GGUF -> UQFF runs", r.returncode == rc.returncode == 0,
              r.stderr + rc.stderr)
        if r.returncode == rc.returncode == 0 and ok:
            err = logits_error(c, a)
            check(f"{case}: that export's logits equal the GGUF's ({err:.2e})", err < 1e-5)


every_architecture_checks()
deepseek_split_checks()
gpt_oss_mxfp4_checks()
finish()
