#!/usr/bin/env python3
"""Test fixture: token ids from the Hugging Face `tokenizers` library for real vocabularies run with each Unicode
normalizer (NFC, NFD, NFKC, NFKD), StripAccents and BERT's normalizer, on text full of composed, decomposed and
compatibility characters. hf_normalizer_test.cpp encodes the same texts with the same tokenizer.json files
through qrt and must get the same ids.

    hf_normalizer_cases.py <output dir>

Writes <output dir>/cases.json, {"seed": N, "cases": [{"name", "tokenizer" (a file beside it), "texts",
"ids"}]}, and the tokenizer.json files:
  gpt2_{nfc,nfd,nfkc,nfkd}, gpt2_nfkc_lowercase,  GPT-2's byte-level BPE (tokenizers/gpt2) with that normalizer
  gpt2_nfkd_strip_accents
  phi3_nfkc                                     Phi-3's SentencePiece-style BPE with byte fallback, NFKC first
  bert_uncased                                  BERT-base uncased WordPiece (the ggml-vocab bert-bge vocabulary,
                                                read back into HF form) with BertNormalizer: accents stripped
The texts are fixed cases plus random ones, from a fresh seed each run (printed; QRT_TOKENIZER_ORACLE_SEED=<seed>
repeats a run), each also in its NFD spelling. Exit 77 (skipped) without the data, tokenizers or gguf-py.
"""
import json
import os
import random
import shutil
import sys
import unicodedata
from pathlib import Path

try:
    import gguf
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
except ImportError as e:
    print(f"SKIP: {e.name} is not installed (pip install -r tests/oracle/requirements.txt)")
    sys.exit(77)

RANDOM_TEXTS = 60

FIXED_TEXTS = [
    "caf\u00e9 cafe\u0301 CAF\u00c9 CAFE\u0301",
    "\u00c5ngstr\u00f6m \u212bngstro\u0308m A\u030angstro\u0308m",
    "\ufb01nancial \ufb02ow \ufb03 of\ufb00ice",
    "\u2460 \u2461 \u2473 \u00bd \u00b2 \u2122 \u3392 \u33a1",
    "\uff28\uff45\uff4c\uff4c\uff4f\uff0c \uff37\uff4f\uff52\uff4c\uff44\uff01 \uff76\uff9e\uff77\uff9e",
    "\ud55c\uad6d\uc5b4 \u1112\u1161\u11ab\u1100\u116e\u11a8\u110b\u1165 \uac00\u11a8",
    "Vi\u1ec7t Nam vie\u0323\u0302t Cu\u031b\u0309a",
    "a\u0323\u0302 a\u0302\u0323 \u1ead \u1e9b\u0323 \u017f",
    "\u0958\u0959 \u0915\u093c \u0928\u093c\u0940",
    "\u03ac\u03ad\u03ae \u03b1\u0301 \u1f00\u0345 \u0390",
    "\uf900\uf901 \u8c48 \u66f4",
    "x\U0001d16d\U0001d165 \U0001d15e \U0001d400\U0001d401",
    "e\u0301\u0301\u0301 \u0301start 1\u20dd a\u20de \u0915\u093e\u0903",
    "   spaced\u00a0out\u2003text\u3000 ",
    "The quick brown fox jumps over the lazy dog. 1234567890",
]

# Pools of old, assigned code points (Unicode 6.0 or earlier, so that every normalization table agrees).
LATIN_BASES = "aeiouycnszAEIOUYCNSZ"
# Nonspacing marks, and a few spacing (Mc) and enclosing (Me) ones, which StripAccents removes and BERT keeps.
COMBINING = [chr(c) for c in range(0x300, 0x370)] + ["\u0323", "\u0328", "\u031b", "\u0345", "\u0903", "\u093e",
                                                     "\u20dd", "\u20e3"]
PRECOMPOSED_RANGES = [(0xC0, 0x17F), (0x1E00, 0x1EFF), (0x1F00, 0x1FFE), (0x386, 0x3CE), (0x400, 0x45F)]
COMPATIBILITY_RANGES = [(0xFB00, 0xFB06), (0x2460, 0x24EA), (0xFF01, 0xFF9F), (0x3300, 0x3357), (0xBC, 0xBE),
                        (0x2070, 0x2079), (0x2150, 0x217F), (0x1D400, 0x1D44E), (0x3200, 0x321E), (0xF900, 0xFA0D),
                        (0x2000, 0x200A), (0x2100, 0x213A), (0xFE30, 0xFE6B)]
WORDS = ["hello", "world", "token", "Caf\u00e9", "na\u00efve", "r\u00e9sum\u00e9", "\u00fcber", "stra\u00dfe",
         "\u65e5\u672c\u8a9e", "\u4e2d\u6587", "\U0001f600", "\U0001f680", "123", "4.5", "--", "!?", "\n", "\t"]


def assigned(cp):
    return unicodedata.category(chr(cp)) != "Cn"


def random_from(rng, ranges):
    while True:
        first, last = rng.choice(ranges)
        cp = rng.randint(first, last)
        if assigned(cp):
            return chr(cp)


def random_piece(rng):
    kind = rng.randrange(7)
    if kind == 0:
        return rng.choice(LATIN_BASES) + "".join(rng.choice(COMBINING) for _ in range(rng.randint(1, 3)))
    if kind == 1:
        return "".join(random_from(rng, PRECOMPOSED_RANGES) for _ in range(rng.randint(1, 5)))
    if kind == 2:
        return "".join(chr(rng.randint(0xAC00, 0xD7A3)) for _ in range(rng.randint(1, 3)))
    if kind == 3:
        # Conjoining jamo: leading consonant, vowel, and sometimes a trailing consonant.
        jamo = chr(rng.randint(0x1100, 0x1112)) + chr(rng.randint(0x1161, 0x1175))
        return jamo + (chr(rng.randint(0x11A8, 0x11C2)) if rng.random() < 0.5 else "")
    if kind == 4:
        return "".join(random_from(rng, COMPATIBILITY_RANGES) for _ in range(rng.randint(1, 4)))
    return rng.choice(WORDS)


def random_text(rng):
    pieces = [random_piece(rng) for _ in range(rng.randint(1, 8))]
    return "".join(p + rng.choice(["", " ", " ", "  ", ".", ","]) for p in pieces)


def texts_for_run(seed):
    rng = random.Random(seed)
    texts = FIXED_TEXTS + [random_text(rng) for _ in range(RANDOM_TEXTS)]
    out = []
    for text in texts:
        out.append(text)
        decomposed = unicodedata.normalize("NFD", text)
        if decomposed != text:
            out.append(decomposed)
    return out


def with_normalizer(path, normalizer):
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.normalizer = normalizer
    # GPT-2's file truncates to 50 tokens, a batch-encoding setting qrt ignores: the ids of whole texts here.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def bert_uncased(data):
    """BERT-base uncased as a HF tokenizer, from the bert-bge GGUF vocabulary: llama.cpp's converter marks a word
    start with U+2581 and drops the "##" of continuations; this puts them back."""
    reader = gguf.GGUFReader(str(data / "ggml-vocab" / "ggml-vocab-bert-bge.gguf"))
    tokens_field = reader.fields["tokenizer.ggml.tokens"]
    types_field = reader.fields["tokenizer.ggml.token_type"]
    tokens = [bytes(tokens_field.parts[i]).decode("utf-8") for i in tokens_field.data]
    types = [int(types_field.parts[i][0]) for i in types_field.data]
    vocab = {}
    for token_id, (token, token_type) in enumerate(zip(tokens, types)):
        if token.startswith("\u2581"):
            token = token[1:]
        elif token_type == 1:  # a normal token without the word-start mark continues a word
            token = "##" + token
        vocab.setdefault(token, token_id)
    tokenizer = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tokenizer.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    check_bert_reconstruction(tokenizer, data)
    return tokenizer


def check_bert_reconstruction(tokenizer, data):
    """The rebuilt tokenizer must reproduce the ids llama.cpp recorded for bert-bge, or the comparison would rest
    on a wrong vocabulary."""
    base = data / "ggml-vocab" / "ggml-vocab-bert-bge.gguf"
    inputs = base.with_suffix(".gguf.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    outputs = base.with_suffix(".gguf.out").read_text(encoding="utf-8").split("\n")
    for text, line in zip(inputs, outputs):
        want = [int(x) for x in line.split()]
        got = tokenizer.encode(text, add_special_tokens=False).ids
        if got != want:
            raise SystemExit(f"the rebuilt BERT vocabulary gives {got} for {text!r}, llama.cpp recorded {want}")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out_dir = Path(sys.argv[1])
    data = Path(os.environ.get("QRT_TEST_DATA", Path(__file__).resolve().parents[4] / "shared" / "data"))
    gpt2 = data / "tokenizers" / "gpt2" / "tokenizer.json"
    phi3 = data / "tokenizers" / "phi3" / "tokenizer.json"
    if not gpt2.exists() or not phi3.exists():
        print(f"SKIP: the tokenizer files are not under {data}")
        return 77
    seed = int(os.environ.get("QRT_TOKENIZER_ORACLE_SEED") or random.SystemRandom().randrange(1 << 31))
    texts = texts_for_run(seed)

    phi3_steps = json.loads(phi3.read_text(encoding="utf-8"))["normalizer"]["normalizers"]
    if [step["type"] for step in phi3_steps] != ["Prepend", "Replace"]:
        raise SystemExit(f"{phi3}: expected the normalizers Prepend, Replace; found {phi3_steps}")
    tokenizers = {
        "gpt2_nfc": with_normalizer(gpt2, normalizers.NFC()),
        "gpt2_nfd": with_normalizer(gpt2, normalizers.NFD()),
        "gpt2_nfkc": with_normalizer(gpt2, normalizers.NFKC()),
        "gpt2_nfkd": with_normalizer(gpt2, normalizers.NFKD()),
        "gpt2_nfkc_lowercase": with_normalizer(gpt2, normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])),
        "gpt2_nfkd_strip_accents": with_normalizer(gpt2, normalizers.Sequence(
            [normalizers.NFKD(), normalizers.StripAccents()])),
        # Phi-3 keeps its own Prepend/Replace steps after NFKC.
        "phi3_nfkc": with_normalizer(phi3, normalizers.Sequence(
            [normalizers.NFKC(), normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])),
        "bert_uncased": bert_uncased(data),
    }

    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    cases = []
    for name, tokenizer in tokenizers.items():
        file_name = f"{name}.tokenizer.json"
        tokenizer.save(str(out_dir / file_name), pretty=False)
        ids = [tokenizer.encode(text, add_special_tokens=False).ids for text in texts]
        cases.append({"name": name, "tokenizer": file_name, "texts": texts, "ids": ids})
    tmp = out_dir / "cases.json.tmp"
    tmp.write_text(json.dumps({"seed": seed, "cases": cases}, ensure_ascii=False), encoding="utf-8")
    tmp.replace(out_dir / "cases.json")
    print(f"{len(cases)} tokenizers x {len(texts)} texts (QRT_TOKENIZER_ORACLE_SEED={seed}) in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
