"""What the real-vocabulary oracles (test_o200k.py, test_gemma3_tokenizer.py) share: the texts, the comparison of a
tokenizer under test with the reference library, and qrt's tokenizer behind a model."""
import importlib
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "model"))
from e2e_checks import check, finish  # noqa: E402,F401  (the tests take both from here)


def start():
    """The command line every real-vocabulary test takes (<quantize-model> <convert-model> <libruntime.so>
    <python dir> <work dir>), the shared data it needs (else: skipped), qrt's Python binding on that library, and a
    fresh work directory. Returns (quantize-model, convert-model, data dir, work dir, the qrt module)."""
    quantize, convert, lib, pydir, work = sys.argv[1:6]
    data = os.environ.get("QRT_TEST_DATA", "")
    if not (os.path.isdir(os.path.join(data, "corpus")) and os.path.isdir(os.path.join(data, "ggml-vocab"))):
        print(f"skipped: test data not found under QRT_TEST_DATA={data!r}")
        sys.exit(77)
    os.environ["QRT_LIBRARY"] = lib
    sys.path.insert(0, pydir)
    qrt = importlib.import_module("qrt")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    return quantize, convert, data, work, qrt


def texts(data):
    """Every test string of llama.cpp's vocabulary tests (ggml-vocab-*.inp), thirty 4000-character pieces of the
    corpus, and strings aimed at the splitting rules (contractions in capitals, scripts without spaces, emoji with
    modifiers, combining marks, CR LF, runs of spaces, digits, code), each once."""
    out = []
    vocab_tests = os.path.join(data, "ggml-vocab")
    for name in sorted(os.listdir(vocab_tests)):
        if name.endswith(".inp"):
            with open(os.path.join(vocab_tests, name), encoding="utf-8") as f:
                out += f.read().split("\n__ggml_vocab_test__\n")
    with open(os.path.join(data, "corpus", "war-and-peace.txt"), encoding="utf-8") as f:
        book = f.read()
    out += [book[i:i + 4000] for i in range(0, 120000, 4000)]
    out += ["DON'T you SEE? I'll we'd THEY'RE", "Ünïcödé ✓ 日本語のテキスト 中文 العربية हिन्दी 🤖👍🏽",
            "ﬁ ligatures, e\u0301 combining, \u200b zero width", "line\r\nbreaks\r\n\r\n  and\ttabs   ",
            "numbers 1234567 3.14159 1/2 0x1F", "path/to/file.py:12 // comment /* x */", "    indented\n\tcode", ""]
    return list(dict.fromkeys(out))


def compare(label, encode, reference, plain, chats, decode=None):
    """encode(text, parse_special) against reference(text, parse_special): the plain texts as text, the chats with
    their special tokens parsed; decode(reference ids) must give every plain text back."""
    bad = [(t[:60], encode(t, False)[:12], reference(t, False)[:12]) for t in plain
           if encode(t, False) != reference(t, False)]
    check(f"{label}: {len(plain)} texts tokenize as the reference", not bad, f"{len(bad)} differ, first: {bad[:2]}")
    bad = [(c[:40], encode(c, True)[:16], reference(c, True)[:16]) for c in chats
           if encode(c, True) != reference(c, True)]
    check(f"{label}: {len(chats)} chat turns with their special tokens parsed", not bad, bad)
    if decode is not None:
        bad = [t[:40] for t in plain if decode(reference(t, False)) != t]
        check(f"{label}: detokenizing the reference's ids gives every text back", not bad, f"{len(bad)}: {bad[:3]}")


def qrt_tokenizer(qrt, path):
    """qrt's tokenizer of the model at `path`: (model, encode(text, parse_special) without BOS, detokenize)."""
    m = qrt.Model(path)
    return m, (lambda t, special: m.tokenize(t, add_special=False, parse_special=special)), m.detokenize


def run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


def gguf_round_trip(qrt, tools, checkpoint, compare_all, check_fields, hf_parses_specials=False):
    """quantize-model writes `checkpoint` as a GGUF file (check_fields(gguf-py's fields) checks its tokenizer keys),
    qrt tokenizes from it; convert-model writes it back as a UQFF export whose tokenizer.json tokenizes the same in
    Hugging Face `tokenizers` and in qrt. tools: (quantize-model, convert-model). compare_all(label, encode, decode,
    **kw) runs the test's comparison; hf_parses_specials passes specials_as_text=False for `tokenizers`."""
    from gguf import GGUFReader
    from tokenizers import Tokenizer

    quantize, convert = tools
    gguf = checkpoint + ".gguf"
    r = run([quantize, checkpoint, "-o", gguf, "--type", "q8_0", "--quiet"])
    check("quantize-model writes the checkpoint as GGUF", r.returncode == 0, r.stderr)
    if r.returncode != 0:
        return
    check_fields(GGUFReader(gguf).fields)
    model, encode, decode = qrt_tokenizer(qrt, gguf)
    compare_all("qrt, the GGUF's vocabulary", encode, decode)
    del model
    back = checkpoint + "-uqff"
    r = run([convert, gguf, "-o", back, "--quiet"])
    check("convert-model writes the GGUF back as a UQFF export", r.returncode == 0, r.stderr)
    if r.returncode != 0:
        return
    written = Tokenizer.from_file(os.path.join(back, "tokenizer.json"))
    kw = {"specials_as_text": False} if hf_parses_specials else {}
    compare_all("Hugging Face tokenizers on the tokenizer.json written from the GGUF",
                lambda t, special: written.encode(t, add_special_tokens=False).ids, **kw)
    model, encode, decode = qrt_tokenizer(qrt, back)
    compare_all("qrt, the UQFF export", encode, decode)
