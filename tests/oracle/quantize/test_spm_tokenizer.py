#!/usr/bin/env python3
"""SentencePiece-style tokenizers (Llama 2 style: byte fallback, "▁" for spaces) between tokenizer.json and GGUF,
checked against references qrt did not write:

  * quantize-model -o x.gguf from the stories260K Hugging Face checkpoint: its tokenizer metadata equals the one
    llama.cpp's converter wrote into stories260K.gguf (model "llama", every token, score and token type, the
    unknown/BOS/EOS ids), and qrt loading the new file tokenizes corpus text as Hugging Face `tokenizers` does with
    the source tokenizer.json;
  * convert-model stories260K.gguf -o DIR (llama.cpp's file): the written tokenizer.json tokenizes the corpus as
    the checkpoint's own tokenizer.json in `tokenizers`, and run-model's greedy continuation from the UQFF export
    is llama2.c's golden one;
  * convert-model of a GGUF model carrying Llama 2's real vocabulary (llama.cpp's ggml-vocab-llama-spm.gguf, 32000
    tokens): the written tokenizer.json gives llama.cpp's recorded ids for its 47 test strings, in `tokenizers`
    and in qrt.

usage: test_spm_tokenizer.py <quantize-model> <convert-model> <libruntime.so> <python dir> <work dir>
"""
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    from gguf import GGUFReader, GGUFWriter
    from tokenizers import Tokenizer
except ImportError as e:  # pragma: no cover
    print("skipped: missing python module:", e)
    sys.exit(77)

QUANTIZE, CONVERT, LIB, PYDIR, WORK = sys.argv[1:6]
DATA = os.environ.get("QRT_TEST_DATA", "")
STORIES_HF = os.path.join(DATA, "stories260K-hf")
STORIES_GGUF = os.path.join(DATA, "stories260K", "stories260K.gguf")
SPM_VOCAB = os.path.join(DATA, "ggml-vocab", "ggml-vocab-llama-spm.gguf")
CORPUS = os.path.join(DATA, "corpus")
if not all(os.path.exists(p) for p in (STORIES_HF, STORIES_GGUF, SPM_VOCAB, CORPUS)):
    print(f"skipped: test data not found under QRT_TEST_DATA={DATA!r}")
    sys.exit(77)

os.environ["QRT_LIBRARY"] = LIB
sys.path.insert(0, PYDIR)
import qrt  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "e2e"))
from e2e_checks import check, finish  # noqa: E402
from gguf_fields import field  # noqa: E402


def run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


def corpus_lines(limit=60):
    lines = []
    for name in sorted(os.listdir(CORPUS)):
        path = os.path.join(CORPUS, name)
        if os.path.isfile(path) and name.endswith(".txt"):
            with open(path, encoding="utf-8", errors="ignore") as f:
                lines += [ln.rstrip("\n") for ln in f if ln.strip()][:limit // 2]
        if len(lines) >= limit:
            break
    return lines[:limit] + ["  two  spaces", "tabs\tand\nnewlines", "ünïcödé ✓ 日本", ""]


os.makedirs(WORK, exist_ok=True)
texts = corpus_lines()

# ---- tokenizer.json -> GGUF: stories260K's checkpoint against llama.cpp's stories260K.gguf ------------------------
src = os.path.join(WORK, "stories-hf")
shutil.rmtree(src, ignore_errors=True)
shutil.copytree(STORIES_HF, src)
out = os.path.join(WORK, "stories-q8_0.gguf")
if os.path.exists(out):
    os.remove(out)
r = run([QUANTIZE, src, "-o", out, "--type", "q8_0", "--quiet"])
check("quantize-model of a SentencePiece-style checkpoint to .gguf", r.returncode == 0, r.stderr)
if r.returncode == 0:
    ours, ref = GGUFReader(out), GGUFReader(STORIES_GGUF)
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
                "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"):
        a, b = field(ours, key), field(ref, key)
        check(f"{key} equals llama.cpp's", a == b, (a if not isinstance(a, list) else a[:8],
                                                    b if not isinstance(b, list) else b[:8]))
    hf = Tokenizer.from_file(os.path.join(src, "tokenizer.json"))
    model = qrt.Model(out)
    bad = [(t, model.tokenize(t, add_special=False), hf.encode(t, add_special_tokens=False).ids) for t in texts
           if model.tokenize(t, add_special=False) != hf.encode(t, add_special_tokens=False).ids]
    check(f"qrt on the GGUF tokenizes {len(texts)} texts as tokenizers on the source", not bad, bad[:2])
    model.close()

# ---- GGUF -> tokenizer.json: llama.cpp's stories260K.gguf to a UQFF export ---------------------------------------
back = os.path.join(WORK, "stories-uqff")
shutil.rmtree(back, ignore_errors=True)
r = run([CONVERT, STORIES_GGUF, "-o", back, "--quiet"])
check("convert-model stories260K.gguf to UQFF", r.returncode == 0, r.stderr)
if r.returncode == 0:
    written = Tokenizer.from_file(os.path.join(back, "tokenizer.json"))
    hf = Tokenizer.from_file(os.path.join(STORIES_HF, "tokenizer.json"))
    bad = [t for t in texts
           if written.encode(t, add_special_tokens=False).ids != hf.encode(t, add_special_tokens=False).ids]
    check(f"the written tokenizer.json tokenizes {len(texts)} texts as the checkpoint's own", not bad, bad[:2])
    undecoded = [t for t in texts if written.decode(written.encode(t, add_special_tokens=False).ids) != t]
    check("and decodes them back", not undecoded, undecoded[:2])
    golden = open(os.path.join(DATA, "stories260K", "golden_greedy_once_upon_a_time.txt")).read()
    want = golden.split("text:\n", 1)[1]
    m = qrt.Model(back)
    got = m.session().generate_text("Once upon a time", max_tokens=40, temperature=0.0)
    continuation = want[len("Once upon a time"):]
    check("greedy text from the UQFF export is llama2.c's golden continuation",
          len(got) > 100 and continuation.startswith(got), (got[:80], continuation[:80]))
    m.close()

# ---- GGUF -> tokenizer.json with Llama 2's real vocabulary --------------------------------------------------------
vocab = GGUFReader(SPM_VOCAB)
tokens, scores = field(vocab, "tokenizer.ggml.tokens"), field(vocab, "tokenizer.ggml.scores")
types = field(vocab, "tokenizer.ggml.token_type")
llama2 = os.path.join(WORK, "llama2-vocab.gguf")
w = GGUFWriter(llama2, "llama")
hidden, ffn = 64, 128
w.add_context_length(64)
w.add_embedding_length(hidden)
w.add_block_count(1)
w.add_feed_forward_length(ffn)
w.add_head_count(4)
w.add_head_count_kv(4)
w.add_layer_norm_rms_eps(1e-5)
w.add_rope_freq_base(10000.0)
w.add_rope_dimension_count(hidden // 4)
w.add_tokenizer_model("llama")
w.add_token_list(tokens)
w.add_token_scores(scores)
w.add_token_types(types)
w.add_bos_token_id(field(vocab, "tokenizer.ggml.bos_token_id"))
w.add_eos_token_id(field(vocab, "tokenizer.ggml.eos_token_id"))
w.add_unk_token_id(field(vocab, "tokenizer.ggml.unknown_token_id"))
rng = np.random.default_rng(3)
shapes = {"token_embd.weight": (len(tokens), hidden), "output_norm.weight": (hidden,),
          "output.weight": (len(tokens), hidden),
          "blk.0.attn_norm.weight": (hidden,), "blk.0.ffn_norm.weight": (hidden,),
          "blk.0.attn_q.weight": (hidden, hidden), "blk.0.attn_k.weight": (hidden, hidden),
          "blk.0.attn_v.weight": (hidden, hidden), "blk.0.attn_output.weight": (hidden, hidden),
          "blk.0.ffn_gate.weight": (ffn, hidden), "blk.0.ffn_up.weight": (ffn, hidden),
          "blk.0.ffn_down.weight": (hidden, ffn)}
for name, shape in shapes.items():
    w.add_tensor(name, (rng.standard_normal(shape) * 0.05).astype(np.float16 if len(shape) == 2 else np.float32))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
llama2_uqff = os.path.join(WORK, "llama2-uqff")
shutil.rmtree(llama2_uqff, ignore_errors=True)
r = run([CONVERT, llama2, "-o", llama2_uqff, "--quiet"])
check("convert-model of a GGUF with Llama 2's vocabulary", r.returncode == 0, r.stderr)
if r.returncode == 0:
    inputs = open(SPM_VOCAB + ".inp", encoding="utf-8").read().split("\n__ggml_vocab_test__\n")
    want = [[int(t) for t in line.split()] for line in open(SPM_VOCAB + ".out").read().split("\n")]
    written = Tokenizer.from_file(os.path.join(llama2_uqff, "tokenizer.json"))
    bad = [(t, written.encode(t, add_special_tokens=False).ids, ids) for t, ids in zip(inputs, want)
           if written.encode(t, add_special_tokens=False).ids != ids]
    check(f"tokenizers with the written tokenizer.json gives llama.cpp's ids for {len(inputs)} strings", not bad,
          bad[:2])
    m = qrt.Model(llama2_uqff)
    bad = [(t, m.tokenize(t, add_special=False), ids) for t, ids in zip(inputs, want)
           if m.tokenize(t, add_special=False) != ids]
    check("and so does qrt", not bad, bad[:2])
    cfg = json.load(open(os.path.join(llama2_uqff, "tokenizer_config.json")))
    check("tokenizer_config.json names <s>, </s> and <unk>",
          (cfg.get("bos_token"), cfg.get("eos_token"), cfg.get("unk_token")) == ("<s>", "</s>", "<unk>"), cfg)
    m.close()

finish()
