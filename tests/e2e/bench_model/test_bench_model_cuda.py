"""bench-model with --device cuda on the SIMT layer (a CPU runtime for qrt's CUDA code): the CUDA backend's paths that
the figures rest on, for the tiny dense and mixture-of-experts shapes. The speeds mean nothing here; what is checked:
each decoded token is one graph launch (ops/token "1+n", n the device operations, as many per layer for both shapes
plus the experts' few), the cache is f16 (the CUDA default), the logits are finite (bench-model refuses others), the
byte counts are the CPU run's, and batched decode steps run for each batch size.

usage: test_bench_model_cuda.py <bench-model built against the SIMT layer> <work dir>"""
import json
import math
import os
import subprocess
import sys

TOOL, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}: {detail}")


def bench(shape, device, extra):
    path = os.path.join(WORK, f"{shape}-{device}.json")
    if os.path.exists(path):
        os.remove(path)
    run = subprocess.run([TOOL, "--shape", shape, "--device", device, "--formats", "q4_k,q8_0", "--prompt", "9",
                          "--decode", "3", "--repetitions", "1", "--json", path] + extra,
                         capture_output=True, text=True, timeout=280)
    print(run.stdout)
    check(f"{shape} {device} exit status", run.returncode == 0, run.stderr[-2000:])
    if run.returncode != 0:
        return None, run.stdout
    with open(path) as f:
        return json.load(f), run.stdout


ops = {}
for shape in ("tiny", "tiny-moe"):
    cpu, _ = bench(shape, "cpu", [])
    cuda, table = bench(shape, "cuda", ["--batch", "1,3"])
    if cpu is None or cuda is None:
        continue
    check(f"{shape} device", cuda.get("device") == "cuda:0", cuda.get("device"))
    by_format = {r["format"]: r for r in cpu["results"]}
    for r in cuda["results"]:
        fmt = r["format"]
        want = by_format.get(fmt, {})
        for key in ("weight_bytes", "decode_weight_bytes_per_token"):
            check(f"{shape} {fmt} {key} as on the CPU", r.get(key) == want.get(key), (r.get(key), want.get(key)))
        check(f"{shape} {fmt} f16 cache", r.get("kv_type") == "f16", r.get("kv_type"))
        n = r.get("decode_graph_operations_per_token", 0)
        check(f"{shape} {fmt} one graph launch per token", isinstance(n, int) and n > 0, n)
        ops[(shape, fmt)] = n
        check(f"{shape} {fmt} ops/token in the table", f"1+{n}" in table, table)
        for key in ("prefill_tokens_per_s", "decode_tokens_per_s", "peak_device_bytes"):
            v = r.get(key)
            check(f"{shape} {fmt} {key}", isinstance(v, (int, float)) and math.isfinite(v) and v > 0, v)
    got = [(r.get("format"), r.get("batch")) for r in cuda.get("batch_decode", [])]
    check(f"{shape} batched decode", got == [("q4_k", 1), ("q4_k", 3), ("q8_0", 1), ("q8_0", 3)], got)

# The mixture's step runs more operations than the dense one (router, routing, the experts' launches and their
# combine replace the dense MLP's), but a bounded number per layer: the graph holds the whole step.
for fmt in ("q4_k", "q8_0"):
    dense, moe = ops.get(("tiny", fmt)), ops.get(("tiny-moe", fmt))
    if dense and moe:
        check(f"{fmt}: the mixture's step has more operations than the dense one", moe > dense, (dense, moe))
        check(f"{fmt}: at most 12 more per layer (2 layers)", moe - dense <= 24, (dense, moe))

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
