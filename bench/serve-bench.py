#!/usr/bin/env python3
"""Serving benchmark: aggregate and per-stream generation speed and time to first token of serve-model at several
numbers of concurrent streams. Each stream sends --requests-per-stream streamed /v1/completions requests (greedy,
up to --max-tokens; the model's end of generation can stop one early, which tokens_per_request shows) one after
another; the figures of a level are medians over its requests.

Starts serve-model itself (--serve-model and MODEL, on a free port, --max-seqs = the largest level) or measures
a running server (--url). Standard library only, so it runs on a bare GPU machine.

  bench/serve-bench.py --serve-model build/bin/serve-model MODEL [--device cuda] [--streams 1,8,32]
                       [--max-tokens 128] [--requests-per-stream 3] [--json out.json]
  bench/serve-bench.py --url http://127.0.0.1:8080 --model NAME ...

Columns: streams, requests, aggregate tok/s (all generated tokens over the level's wall time), per-stream tok/s
(median over requests of tokens / (last token time - first token time)), TTFT median and p90 in ms."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

PROMPTS = ["Once upon a time", "The little dog", "One day, a girl", "In the big forest", "The king said",
           "Tom and his mom", "A bird in a tree", "It was a sunny day"]


def stream_request(url, model, prompt, max_tokens, api_key):
    """One streamed completion; returns (ttft seconds, decode seconds, tokens)."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "stream": True, "stream_options": {"include_usage": True}}).encode()
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    req = urllib.request.Request(url + "/v1/completions", data=body, headers=headers, method="POST")
    start = time.perf_counter()
    first = last = None
    tokens = 0
    with urllib.request.urlopen(req, timeout=3600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
                continue
            now = time.perf_counter()
            if chunk["choices"] and chunk["choices"][0].get("text"):
                first = first if first is not None else now
                last = now
    if first is None:
        raise RuntimeError("the stream carried no text")
    return first - start, last - first, tokens


def run_level(url, model, streams, max_tokens, per_stream, api_key):
    results, errors = [], []
    lock = threading.Lock()

    def worker(i):
        for k in range(per_stream):
            try:
                r = stream_request(url, model, PROMPTS[(i + k) % len(PROMPTS)], max_tokens, api_key)
                with lock:
                    results.append(r)
            except Exception as e:  # noqa: BLE001 - reported with the level
                with lock:
                    errors.append(str(e))

    start = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed at {streams} streams: {errors[0]}")
    ttft = sorted(r[0] for r in results)
    per = [(r[2] - 1) / r[1] for r in results if r[1] > 0 and r[2] > 1]
    return {"streams": streams, "requests": len(results), "wall_seconds": wall,
            "aggregate_tokens_per_second": sum(r[2] for r in results) / wall,
            "per_stream_tokens_per_second": statistics.median(per) if per else 0.0,
            "ttft_ms_median": 1000 * statistics.median(ttft),
            "ttft_ms_p90": 1000 * ttft[min(len(ttft) - 1, int(0.9 * len(ttft)))],
            "tokens_per_request": statistics.median(r[2] for r in results)}


def start_server(binary, model, streams, extra):
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    proc = subprocess.Popen([binary, model, "--port", "0", "--max-seqs", str(streams), *extra],
                            stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.time() + 600
    while time.time() < deadline:
        if proc.poll() is not None:
            break
        log.seek(0)
        m = re.search(r"listening on http://([\d.]+):(\d+) \(model (\S+)", log.read())
        if m:
            return proc, f"http://{m.group(1)}:{m.group(2)}", m.group(3)
        time.sleep(0.1)
    log.seek(0)
    proc.kill()
    raise RuntimeError("serve-model did not start: " + log.read()[-2000:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", help="model path for --serve-model")
    ap.add_argument("--serve-model", help="serve-model binary to start")
    ap.add_argument("--url", help="a running server instead")
    ap.add_argument("--model-name", help="the served name (with --url)")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--streams", default="1,8,32")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--requests-per-stream", type=int, default=3)
    ap.add_argument("--json", help="write the figures here")
    args, extra = ap.parse_known_args()
    levels = [int(x) for x in args.streams.split(",") if x]
    if not levels or min(levels) < 1:
        ap.error("--streams needs positive counts")
    proc = None
    if args.url:
        url, name = args.url.rstrip("/"), args.model_name or ""
    elif args.serve_model and args.model:
        proc, url, name = start_server(args.serve_model, args.model, max(levels), extra)
    else:
        ap.error("give --serve-model and MODEL, or --url")
    try:
        rows = [run_level(url, name, n, args.max_tokens, args.requests_per_stream, args.api_key) for n in levels]
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=30)
    print("| streams | requests | aggregate tok/s | per-stream tok/s | TTFT median ms | TTFT p90 ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['streams']} | {r['requests']} | {r['aggregate_tokens_per_second']:.1f} | "
              f"{r['per_stream_tokens_per_second']:.1f} | {r['ttft_ms_median']:.1f} | {r['ttft_ms_p90']:.1f} |")
    base = rows[0]["aggregate_tokens_per_second"]
    if base > 0 and len(rows) > 1:
        print(f"aggregate at {rows[-1]['streams']} streams: {rows[-1]['aggregate_tokens_per_second'] / base:.2f}x "
              f"that at {rows[0]['streams']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tool": "serve-bench", "url": url, "model": name, "max_tokens": args.max_tokens,
                       "levels": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
