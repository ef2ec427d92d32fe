"""serve-model end to end with the real `openai` Python client, on the trained stories260K model (CPU backend):

* /v1/completions and /v1/chat/completions, plain and streamed (SSE ending in [DONE], usage when asked): greedy
  text equals run-model's for the same prompt (chat: a copy of the HF checkpoint given a ChatML template), the
  streamed pieces join to the plain text; logprobs: one entry per token, spelling the text, greedy = most likely;
* 32 concurrent clients with different prompts each get exactly the text they get alone, decoded 4 at a time in
  one batched step (serve-model's engine, --max-seqs 4);
* while one long request generates, a second one starts and finishes first (requests interleave);
* a client that drops a stream frees its session and its KV cache blocks (/metrics: nothing running, one
  cancelled, no block held);
* a KV cache pool too small for all clients (--kv-cache-mem): requests are preempted and recomputed, each still
  gets the text it gets alone, every block comes back; a repeated long prompt reuses its cached prefix blocks;
* errors in OpenAI's shape with the right status: bad JSON and bad parameters 400, unknown model 404, a prompt
  longer than the context 400 context_length_exceeded, a wrong API key 401, every session busy and no room to
  wait 503; and the server keeps serving after each.

Extra arguments after the work dir go to every serve-model and run-model (e.g. --device cuda: the gpu-sim label runs
this script on binaries built against the SIMT layer, tests/simt/CMakeLists.txt, with shorter generations and 4
concurrent clients instead of 32, as the layer runs the model at about 10 tokens/s).

usage: test_serve_model.py <serve-model> <run-model> <work dir> [arguments...]"""
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

try:
    import openai
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

SERVE, RUN, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
EXTRA = sys.argv[4:]
SIMULATED = "cuda" in EXTRA
# The simulated GPU is given 1 GiB: on cuda the pool's default is 0.9 of the free device memory, which the layer
# backs with host memory.
SIMULATED_GIB = 1
SERVE_ENV = dict(os.environ, QRT_SIMT_DEVICE_GIB=str(SIMULATED_GIB)) if SIMULATED else None
N_TEXT = 12 if SIMULATED else 40        # tokens of the texts compared with run-model
N_LONG = 40 if SIMULATED else 3000      # the long request that another one overtakes
CLIENTS, N_CLIENT = (4, 6) if SIMULATED else (32, 24)
DATA = os.environ.get("QRT_TEST_DATA", "")
GGUF = os.path.join(DATA, "stories260K", "stories260K.gguf")
HF = os.path.join(DATA, "stories260K-hf")
if not (os.path.isfile(GGUF) and os.path.isdir(HF)):
    print(f"skipped: stories260K test data not found under QRT_TEST_DATA={DATA!r}")
    sys.exit(77)

# A small ChatML template, as many instruct models ship it, for the chat endpoint on a copy of the checkpoint.
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from e2e_checks import check, finish  # noqa: E402


class Server:
    """serve-model on a free port; the port is read from its 'listening on' line."""

    def __init__(self, model, *args):
        self.log = open(os.path.join(WORK, f"serve-{len(os.listdir(WORK))}.log"), "w+")
        self.proc = subprocess.Popen([SERVE, model, "--port", "0", *args, *EXTRA], stdout=subprocess.DEVNULL,
                                     stderr=self.log, env=SERVE_ENV)
        deadline = time.time() + 60
        self.port = None
        while time.time() < deadline and self.port is None:
            if self.proc.poll() is not None:
                break
            self.log.seek(0)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.log.read())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.05)
        if self.port is None:
            self.log.seek(0)
            raise RuntimeError("serve-model did not start: " + self.log.read())
        self.base = f"http://127.0.0.1:{self.port}"

    def client(self, api_key="unused"):
        return openai.OpenAI(base_url=self.base + "/v1", api_key=api_key, max_retries=0, timeout=600)

    def get(self, path):
        with urllib.request.urlopen(self.base + path, timeout=30) as r:
            return r.status, r.read().decode()

    def post_raw(self, path, body, headers=None):
        req = urllib.request.Request(self.base + path, data=body, method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def metrics(self):
        _, text = self.get("/metrics")
        return {k: float(v) for k, v in re.findall(r"^(qrt_\w+) (\S+)$", text, re.M)}

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def run_model(model, prompt, n, *extra):
    out = subprocess.run([RUN, model, "-p", prompt, "-n", str(n), *extra, *EXTRA], capture_output=True, text=True,
                         timeout=300)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return out.stdout[:-1] if out.stdout.endswith("\n") else out.stdout


def completion_text(client, prompt, n, **kw):
    r = client.completions.create(model="stories260K", prompt=prompt, max_tokens=n, temperature=0, **kw)
    return r


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
chat_model = os.path.join(WORK, "stories260K-chat")
shutil.copytree(HF, chat_model)
with open(os.path.join(chat_model, "chat_template.jinja"), "w") as f:
    f.write(CHATML)

PROMPT = "Once upon a time"
server = Server(GGUF, "--max-seqs", "4", "--ctx-size", "4096")
try:
    client = server.client()
    models = client.models.list()
    check("GET /v1/models lists the served model", [m.id for m in models.data] == ["stories260K"], models)
    check("GET /health", server.get("/health") == (200, '{"status":"ok"}'))
    # The pool's default size: 0.9 of the free device memory on cuda (all but the weights' few MiB and the engine's
    # scratch of the simulated 1 GiB), room for --max-seqs full contexts on cpu (4 x 4096 tokens in blocks of 16).
    m = server.metrics()
    if SIMULATED:
        check("default pool: 0.9 of the free device memory",
              0.85 * 2**30 < m["qrt_kv_cache_bytes"] <= 0.9 * 2**30, m)
    else:
        check("default pool: --max-seqs full contexts", m["qrt_kv_blocks"] == 4 * 4096 // 16, m)

    # Greedy text equals run-model's; usage counts the prompt (BOS + 4 tokens) and the completion.
    want = run_model(GGUF, PROMPT, N_TEXT)
    r = completion_text(client, PROMPT, N_TEXT)
    check("completion equals run-model", r.choices[0].text == want, (r.choices[0].text, want))
    check("completion usage", (r.usage.prompt_tokens, r.usage.completion_tokens) == (5, N_TEXT), r.usage)
    check("completion finish_reason length", r.choices[0].finish_reason == "length", r.choices[0].finish_reason)

    pieces, usage, finishes = [], None, []
    for chunk in client.completions.create(model="stories260K", prompt=PROMPT, max_tokens=N_TEXT, temperature=0,
                                           stream=True, stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            pieces.append(c.text)
            if c.finish_reason:
                finishes.append(c.finish_reason)
    check("streamed completion joins to the same text", "".join(pieces) == want, ("".join(pieces), want))
    check("streamed completion ends with usage and one finish_reason",
          usage is not None and usage.completion_tokens == N_TEXT and finishes == ["length"], (usage, finishes))

    # Stop strings: the text ends before the stop string, finish_reason "stop".
    stop_at = want.split()[3]
    r = completion_text(client, PROMPT, N_TEXT, stop=[stop_at])
    check("stop string", r.choices[0].text == want[:want.index(stop_at)] and r.choices[0].finish_reason == "stop",
          (r.choices[0].text, r.choices[0].finish_reason))

    # Log-probabilities: one entry per generated token, the tokens spell the text, and greedy picks the most likely.
    r = completion_text(client, PROMPT, N_TEXT, logprobs=3)
    lp = r.choices[0].logprobs
    check("completion logprobs cover every token", len(lp.tokens) == r.usage.completion_tokens == N_TEXT and
          "".join(lp.tokens) == r.choices[0].text == want, lp)
    check("completion logprobs: greedy tokens are the most likely",
          all(len(top) == 3 and max(top.values()) == v and v <= 0 for top, v in zip(lp.top_logprobs,
                                                                                    lp.token_logprobs)), lp)
    pieces, entries = [], []
    for chunk in client.completions.create(model="stories260K", prompt=PROMPT, max_tokens=N_TEXT, temperature=0,
                                           stream=True, logprobs=1):
        for c in chunk.choices:
            pieces.append(c.text)
            if c.logprobs:
                entries += c.logprobs.tokens
    check("streamed logprobs ride with the text", entries == lp.tokens and "".join(pieces) == want, entries)

    # Sampling with a seed is reproducible.
    a = client.completions.create(model="stories260K", prompt=PROMPT, max_tokens=N_TEXT, temperature=0.9, seed=7)
    b = client.completions.create(model="stories260K", prompt=PROMPT, max_tokens=N_TEXT, temperature=0.9, seed=7)
    check("seeded sampling repeats", a.choices[0].text == b.choices[0].text, (a.choices[0].text, b.choices[0].text))

    # CLIENTS clients at once, different prompts: each gets what it got alone.
    prompts = [f"{w} day, a {x}" for w in ("One", "Every", "That", "Some") for x in
               ("girl", "boy", "dog", "cat", "bird", "king", "frog", "tree")][:CLIENTS]
    alone = [completion_text(client, p, N_CLIENT).choices[0].text for p in prompts]
    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        together = list(pool.map(lambda p: completion_text(client, p, N_CLIENT).choices[0].text, prompts))
    check("concurrent requests are decoded together", server.metrics()["qrt_largest_batch"] == 4,
          server.metrics())
    check(f"{CLIENTS} concurrent clients get their solo text", together == alone,
          [i for i, (x, y) in enumerate(zip(together, alone)) if x != y])

    # A long request and a short one: the short one, started after the long one's first token, ends first.
    events = []
    started = threading.Event()

    def long_request():
        for i, chunk in enumerate(client.completions.create(model="stories260K", prompt=PROMPT, max_tokens=N_LONG,
                                                            temperature=0, stream=True)):
            if i == 0:
                started.set()
        events.append("long done")

    t = threading.Thread(target=long_request)
    t.start()
    started.wait(60)
    completion_text(client, "The dog", 3)
    events.append("short done")
    t.join()
    check("a short request finishes while a long one generates", events == ["short done", "long done"], events)

    # A client that drops its stream frees the session and its KV cache blocks.
    before = server.metrics()
    req = urllib.request.Request(server.base + "/v1/completions", method="POST",
                                 data=json.dumps({"prompt": PROMPT, "max_tokens": 3000, "stream": True,
                                                  "ignore_eos": True}).encode(),
                                 headers={"Content-Type": "application/json"})
    resp = urllib.request.urlopen(req, timeout=30)
    resp.readline()
    streaming = server.metrics()
    resp.close()
    deadline, m = time.time() + 20, {}
    while time.time() < deadline:
        m = server.metrics()
        if m.get("qrt_requests_running") == 0 and m.get("qrt_requests_cancelled_total", 0) > before.get(
                "qrt_requests_cancelled_total", 0):
            break
        time.sleep(0.1)
    check("a dropped stream frees its session", m.get("qrt_requests_running") == 0 and
          m.get("qrt_requests_cancelled_total", 0) == before.get("qrt_requests_cancelled_total", 0) + 1, m)
    check("a dropped stream returns its KV blocks to the pool",
          before["qrt_kv_blocks_used"] == 0 and streaming["qrt_kv_blocks_used"] > 0 and m["qrt_kv_blocks_used"] == 0,
          (before, streaming, m))

    # Errors, each followed by a request that works.
    status, body = server.post_raw("/v1/completions", b"{not json")
    check("bad JSON: 400", status == 400 and body["error"]["type"] == "invalid_request_error", (status, body))
    status, body = server.post_raw("/v1/completions", json.dumps({"prompt": PROMPT, "temperature": 5}).encode())
    check("temperature out of range: 400 naming it", status == 400 and body["error"]["param"] == "temperature",
          (status, body))
    try:
        client.completions.create(model="no-such-model", prompt=PROMPT, max_tokens=4)
        check("unknown model: 404", False, "no error")
    except openai.NotFoundError as e:
        check("unknown model: 404", e.status_code == 404 and e.body["code"] == "model_not_found", e.body)
    try:
        client.completions.create(model="stories260K", prompt="tree " * 5000, max_tokens=4)
        check("prompt longer than the context: 400", False, "no error")
    except openai.BadRequestError as e:
        check("prompt longer than the context: 400", e.body["code"] == "context_length_exceeded", e.body)
    status, body = server.post_raw("/v1/nothing-here", b"{}")
    check("unknown route: 404 in OpenAI's shape", status == 404 and "error" in body, (status, body))
    try:
        client.chat.completions.create(model="stories260K", messages=[{"role": "user", "content": "hi"}])
        check("chat without a chat template: 400", False, "no error")
    except openai.BadRequestError as e:
        check("chat without a chat template: 400", "chat template" in e.body["message"], e.body)
    r = completion_text(client, PROMPT, N_TEXT)
    check("still serving after the errors", r.choices[0].text == want)
    m = server.metrics()
    check("metrics count the requests", m["qrt_sequences"] == 4 and m["qrt_requests_failed_total"] >= 6 and
          m["qrt_generation_tokens_total"] > 0, m)
finally:
    server.stop()

# A KV cache pool too small for every client at once (--kv-cache-mem): requests are preempted and recomputed later,
# and each still gets exactly the text it gets alone; a repeated long prompt reuses the cached blocks of its prefix.
PRE_CLIENTS, N_PRE, PRE_MEM = (4, 24, "0.05") if SIMULATED else (8, 120, "0.25")
server = Server(GGUF, "--max-seqs", str(PRE_CLIENTS), "--ctx-size", "512", "--kv-cache-mem", PRE_MEM,
                "--block-size", "16")
try:
    client = server.client()
    prompts = [f"{w} day, a {x}" for w in ("One", "Every") for x in ("girl", "boy", "dog", "cat")][:PRE_CLIENTS]
    full = {"ignore_eos": True}  # every request runs its N_PRE tokens, so that together they overflow the pool
    alone = [completion_text(client, p, N_PRE, extra_body=full).choices[0].text for p in prompts]
    check("the pool fits one request at a time", server.metrics()["qrt_preemptions_total"] == 0, server.metrics())
    with concurrent.futures.ThreadPoolExecutor(PRE_CLIENTS) as pool:
        together = list(pool.map(lambda p: completion_text(client, p, N_PRE, extra_body=full).choices[0].text,
                                 prompts))
    m = server.metrics()
    check("requests preempted for KV blocks give the text they give alone", together == alone,
          [(a == b) for a, b in zip(together, alone)])
    check("preemptions happened and every block came back", m["qrt_preemptions_total"] > 0 and
          m["qrt_kv_blocks_used"] == 0 and m["qrt_kv_blocks"] * 16 < PRE_CLIENTS * N_PRE, m)
    story = "Once upon a time, there was a little girl named Lily. She loved to play outside with her dog."
    first = completion_text(client, story, N_TEXT).choices[0].text
    reused_before = server.metrics()["qrt_prompt_tokens_reused_total"]
    again = completion_text(client, story, N_TEXT).choices[0].text
    reused = server.metrics()["qrt_prompt_tokens_reused_total"] - reused_before
    check("a repeated prompt reuses its cached blocks", again == first and reused >= 16, (reused, first, again))
finally:
    server.stop()

# Chat on a checkpoint with a template, an API key, and one session with no room to wait.
server = Server(chat_model, "--max-seqs", "1", "--max-waiting", "0", "--api-key", "sesame", "--ctx-size", "4096",
                "--served-model-name", "stories-chat")
try:
    client = server.client("sesame")
    messages = [{"role": "system", "content": "You tell stories."}, {"role": "user", "content": "A cat"}]
    want = run_model(chat_model, "A cat", N_TEXT, "--chat", "--system", "You tell stories.")
    r = client.chat.completions.create(model="stories-chat", messages=messages, max_tokens=N_TEXT, temperature=0)
    check("chat equals run-model --chat", r.choices[0].message.content == want, (r.choices[0].message.content, want))
    check("chat reply role", r.choices[0].message.role == "assistant")
    r = client.chat.completions.create(model="stories-chat", messages=messages, max_tokens=N_TEXT, temperature=0,
                                       logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    check("chat logprobs", len(content) == N_TEXT and "".join(t.token for t in content) == want and
          all(len(t.top_logprobs) == 2 and t.top_logprobs[0].token == t.token and t.logprob <= 0 for t in content),
          content)
    pieces, roles = [], []
    for chunk in client.chat.completions.create(model="stories-chat", messages=messages, max_tokens=N_TEXT,
                                                temperature=0, stream=True):
        for c in chunk.choices:
            if c.delta.role:
                roles.append(c.delta.role)
            pieces.append(c.delta.content or "")
    check("streamed chat joins to the same text", "".join(pieces) == want and roles == ["assistant"],
          ("".join(pieces), roles))
    try:
        server.client("wrong").chat.completions.create(model="stories-chat", messages=messages, max_tokens=3)
        check("wrong API key: 401", False, "no error")
    except openai.AuthenticationError as e:
        check("wrong API key: 401", e.status_code == 401, e.body)
    check("/health needs no key", server.get("/health")[0] == 200)

    # The only session is busy and nobody may wait: 503; the holder then drops its stream, and once the server has
    # noticed (the session is free) a request is served again.
    started, release = threading.Event(), threading.Event()

    def hold():
        stream = client.chat.completions.create(model="stories-chat", messages=messages, max_tokens=4000,
                                                temperature=0, stream=True)
        for _ in stream:
            started.set()
            if release.is_set():
                break
        stream.close()

    t = threading.Thread(target=hold)
    t.start()
    started.wait(120)
    try:
        client.chat.completions.create(model="stories-chat", messages=messages, max_tokens=3)
        check("every session busy: 503", False, "no error")
    except openai.APIStatusError as e:
        check("every session busy: 503", e.status_code == 503 and e.body["code"] == "overloaded", e.body)
    release.set()
    t.join()
    deadline = time.time() + 60
    while time.time() < deadline and server.metrics().get("qrt_requests_running") != 0:
        time.sleep(0.1)
    r = client.chat.completions.create(model="stories-chat", messages=messages, max_tokens=N_TEXT, temperature=0)
    check("served again when the session is free", r.choices[0].message.content == want)
finally:
    server.stop()

# Pool options that cannot work end serve-model at start with an error naming them.
for args, expect in ((["--kv-cache-fraction", "0.5", "--kv-cache-mem", "4"], ["excludes"]),
                     (["--kv-cache-fraction", "1.5"], ["--kv-cache-fraction"]),
                     (["--kv-cache-fraction", "1e-12"], ["holds no block", "MiB free on the"])):
    r = subprocess.run([SERVE, GGUF, "--port", "0", *args, *EXTRA], capture_output=True, text=True, timeout=300,
                       env=SERVE_ENV)
    check(f"serve-model {' '.join(args)} is refused", r.returncode != 0 and all(e in r.stderr for e in expect),
          r.stderr)

finish()
