"""The qrt Python package (python/qrt: ctypes over libruntime's C ABI) on the trained stories260K model:

* the tokenizer gives the ids llama2.c recorded for the golden prompt, and detokenize spells the golden text back;
* Session.generate equals run-model's greedy text, streams the same pieces, and stops at a stop string;
* the chat template of a checkpoint copy renders ChatML, and a model without one raises qrt.Error (not found);
* an Engine with 3 sequences serves 6 concurrent submits (greedy and seeded) with exactly the session's text for
  each, streamed pieces joining to it; a cancelled request ends with stop reason "callback", as does one whose
  on_token callback returns False; counts add up and every KV block comes back; a second engine over a tiny pool
  preempts (its requests held back by a gate request until all are queued) and still gives the same texts;
* errors: a missing model raises qrt.Error with code 2 naming the path; bad engine options and a too-long prompt
  raise or report errors instead of crashing.

usage: test_qrt_package.py <libruntime.so> <run-model> <python dir> <work dir>"""
import os
import shutil
import subprocess
import sys
import threading

LIB, RUN, PYDIR, WORK = sys.argv[1:5]
sys.path.insert(0, PYDIR)
import qrt  # noqa: E402

DATA = os.environ.get("QRT_TEST_DATA", "")
GGUF = os.path.join(DATA, "stories260K", "stories260K.gguf")
GOLDEN = os.path.join(DATA, "stories260K", "golden_greedy_once_upon_a_time.txt")
HF = os.path.join(DATA, "stories260K-hf")
if not (os.path.isfile(GGUF) and os.path.isdir(HF)):
    print(f"skipped: stories260K test data not found under QRT_TEST_DATA={DATA!r}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from e2e_checks import check, finish  # noqa: E402


def golden():
    fields = {}
    with open(GOLDEN) as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        if line.startswith("prompt_ids:"):
            fields["prompt"] = [int(x) for x in line.split(":")[1].split()]
        elif line.startswith("generated_ids:"):
            fields["generated"] = [int(x) for x in line.split(":")[1].split()]
        elif line == "text:":
            fields["text"] = "\n".join(lines[i + 1:]).rstrip("\n")
    return fields


def run_model(prompt, n):
    out = subprocess.run([RUN, GGUF, "-p", prompt, "-n", str(n)], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return out.stdout[:-1] if out.stdout.endswith("\n") else out.stdout


qrt.load_library(LIB)
try:
    qrt.Model("/no/such/model.gguf")
    check("a missing model raises qrt.Error", False, "no error")
except qrt.Error as e:
    check("a missing model raises qrt.Error", e.code == 2 and "/no/such/model.gguf" in str(e), (e.code, str(e)))

model = qrt.Model(GGUF)
g = golden()
check("vocab size", model.vocab_size == 512, model.vocab_size)
check("tokenize gives the recorded prompt ids", model.tokenize("Once upon a time") == g["prompt"],
      model.tokenize("Once upon a time"))
check("detokenize spells the recorded text", "Once upon a time" + model.detokenize(g["generated"]) == g["text"])

want = run_model("Once upon a time", 40)
session = model.session()
pieces = []
session.add_prompt("Once upon a time")
r = session.generate(max_tokens=40, on_text=pieces.append)
check("Session.generate equals run-model", r.text == want and r.stop_reason == "max_tokens", (r.text, want))
check("streamed pieces join to the text", "".join(pieces) == r.text)
check("generated ids are the recorded ones", r.tokens == g["generated"][:40])
check("the session's context is prompt and output", session.tokens == g["prompt"] + r.tokens)
session.reset()
stop_at = want.split()[3]
session.add_prompt("Once upon a time")
r = session.generate(max_tokens=40, stop=[stop_at])
check("stop string", r.text == want[:want.index(stop_at)] and r.stop_reason == "stop_string", r)

try:
    model.render_chat([{"role": "user", "content": "Hi"}])
    check("no chat template: qrt.Error", False, "no error")
except qrt.Error as e:
    check("no chat template: qrt.Error", e.code == 2, str(e))
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
chat_dir = os.path.join(WORK, "stories260K-chat")
shutil.copytree(HF, chat_dir)
with open(os.path.join(chat_dir, "chat_template.jinja"), "w") as f:
    f.write("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
chat_model = qrt.Model(chat_dir)
rendered = chat_model.render_chat([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
check("render_chat applies the template", rendered ==
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", rendered)

# The engine: six requests on three sequences, each as the session gives it alone.
prompts = ["Once upon a time", "The little dog", "One day, a girl", "Tom and his mom", "A bird", "It was a sunny day"]
params = [dict(max_tokens=30, temperature=(0.8 if i % 2 else 0.0), seed=5 + i) for i in range(len(prompts))]
alone = []
for p, kw in zip(prompts, params):
    s = model.session()
    s.add_prompt(p)
    alone.append(s.generate(**kw).text)
with model.engine(max_running=3) as engine:
    requests = [engine.submit(prompt=p, **kw) for p, kw in zip(prompts, params)]
    streamed = {}

    def consume(i):
        streamed[i] = "".join(requests[i])

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    results = [r.result(timeout=120) for r in requests]
    for t in threads:
        t.join()
    check("engine results equal the session's", [r.text for r in results] == alone,
          [(a == b) for a, b in zip((r.text for r in results), alone)])
    check("engine streams join to the results", all(streamed[i] == results[i].text for i in range(len(results))))
    check("engine reports prompt lengths", all(r.prompt_tokens == len(model.tokenize(p))
                                               for r, p in zip(results, prompts)))
    held = engine.submit(prompt="Once upon a time", max_tokens=5000, stop_at_end_of_generation=False)
    next(iter(held))  # it runs
    held.cancel()
    r = held.result(timeout=120)
    check("a cancelled request ends with stop reason callback", r.stop_reason == "callback" and len(r.tokens) < 5000,
          r.stop_reason)
    seen = []

    def three_pieces(piece):
        seen.append(piece)
        return len(seen) < 3  # False at the third: cancel

    stopped = engine.submit(prompt="Once upon a time", max_tokens=50, stop_at_end_of_generation=False,
                            on_token=three_pieces)
    s = stopped.result(timeout=120)
    check("on_token returning False cancels after that token", s.stop_reason == "callback" and len(s.tokens) == 3
          and "".join(seen) == s.text, (s.stop_reason, len(s.tokens), seen, s.text))
    c = engine.counts()
    check("engine counts", c["finished"] == 8 and c["running"] == 0 and c["kv_blocks_used"] == 0 and
          c["generated_tokens"] == sum(len(r.tokens) for r in results) + len(r.tokens) + len(s.tokens), c)
    too_long = engine.submit(prompt="tree " * 5000, max_tokens=3)
    try:
        too_long.result(timeout=60)
        check("a prompt longer than the context fails its request", False, "no error")
    except qrt.Error as e:
        check("a prompt longer than the context fails its request", e.code == 6 and "context" in str(e), str(e))

try:
    model.engine(block_size=12)
    check("a bad engine option raises", False, "no error")
except qrt.Error as e:
    check("a bad engine option raises", e.code == 1 and "power of two" in str(e), str(e))

# A pool of 12 blocks of 16 tokens for three requests of ~65 tokens: preemption, same texts.
long_params = dict(max_tokens=60, stop_at_end_of_generation=False)
alone_long = []
for p in prompts[:4]:
    s = model.session()
    s.add_prompt(p)
    alone_long.append(s.generate(**long_params).text)
per_block = None
with model.engine(max_running=1, context_length=64) as probe:
    c = probe.counts()
    per_block = c["kv_cache_bytes"] // c["kv_blocks"]
with model.engine(max_running=3, context_length=128, kv_cache_bytes=12 * per_block) as engine:
    # A one-token request holds the engine's thread in its token callback until the others are queued, so they
    # all start together whatever the timing (else the first could finish before the last arrived).
    queued = threading.Event()
    gate = engine.submit(prompt=prompts[0], max_tokens=1, on_token=lambda piece: queued.wait(60) and True)
    requests = [engine.submit(prompt=p, **long_params) for p in prompts[:4]]
    queued.set()
    gate.result(timeout=120)
    results = [r.result(timeout=120).text for r in requests]
    c = engine.counts()
    check("a small pool preempts and still gives each request its text", results == alone_long and
          c["preemptions"] > 0 and c["kv_blocks_used"] == 0, (c, [(a == b) for a, b in zip(results, alone_long)]))

finish()
