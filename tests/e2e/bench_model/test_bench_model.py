"""bench-model end to end on the CPU reference backend with the tiny shape.

Checks the JSON it writes: every requested format present, every figure positive and finite, the derived figures
consistent with the raw timings, and the weight byte counts equal to a count made here from each format's block
size and bytes per block (gguf-py's GGML_QUANT_SIZES for the GGML formats when gguf is importable, the published
layouts otherwise; MLX's affine layout for afq4 with groups of 64 and bf16 scales and biases), and the K/V bytes
per decode step from the shape. A sweep of two prompt lengths gives one result and one table row per format and
length; the tiny mixture-of-experts shape counts its experts, routers and q/k norms. Then bad arguments:
an unknown format, shape or KV type must each give one "error: ..." line and exit status 1 (every format in the list
has a quantizer now, so none is refused for lacking one).

usage: test_bench_model.py <bench-model> <work dir>"""
import json
import math
import os
import subprocess
import sys

TOOL, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)

FORMATS = ["q4_k", "q8_0", "afq4", "mxfp4", "bf16"]
# The tiny shape (tools/bench-model.cpp) with --layers 2.
HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FFN, VOCAB = 256, 2, 4, 2, 64, 512, 1024
PROMPT, DECODE = 16, 4

# (weights per block, bytes per block) from the format specs:
#   q4_k: 256 weights in 2 (d) + 2 (dmin) + 12 (6-bit scales/mins) + 128 (4-bit codes) = 144 bytes
#   q8_0: 32 weights in 2 (f16 d) + 32 (int8 codes) = 34 bytes
#   mxfp4: 32 weights in 16 bytes of E2M1 codes + 1 E8M0 scale = 17 bytes
#   afq4, group 64: 32 bytes of 4-bit codes + a bf16 scale + a bf16 bias = 36 bytes
#   bf16: 2 bytes per weight
BLOCKS = {"q4_k": (256, 144), "q8_0": (32, 34), "mxfp4": (32, 17), "afq4": (64, 36), "bf16": (1, 2)}
try:
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T
    # gguf-py's table is the GGML reference; its MXFP4 block is the same 17 bytes per 32 weights.
    for name, t in (("q4_k", T.Q4_K), ("q8_0", T.Q8_0), ("mxfp4", T.MXFP4), ("bf16", T.BF16)):
        if tuple(GGML_QUANT_SIZES[t]) != BLOCKS[name]:
            print(f"FAIL block size of {name}: gguf-py says {GGML_QUANT_SIZES[t]}, this test assumes {BLOCKS[name]}")
            sys.exit(1)
except ImportError:
    print("note: gguf-py not importable; using the block sizes written above")

passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}: {detail}")


def nbytes(fmt, rows, cols):
    per_block, block_bytes = BLOCKS[fmt]
    assert cols % per_block == 0
    return rows * (cols // per_block) * block_bytes


def expected_bytes(fmt):
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    layer = (nbytes(fmt, q, HIDDEN) + 2 * nbytes(fmt, kv, HIDDEN) + nbytes(fmt, HIDDEN, q) +
             2 * nbytes(fmt, FFN, HIDDEN) + nbytes(fmt, HIDDEN, FFN))
    output = nbytes(fmt, VOCAB, HIDDEN)
    embedding = nbytes(fmt, VOCAB, HIDDEN)
    norms = (2 * LAYERS + 1) * HIDDEN * 4  # F32
    total = LAYERS * layer + output + embedding + norms
    per_token = LAYERS * layer + output + nbytes(fmt, 1, HIDDEN)  # linears, output head, one embedding row
    return total, per_token


def positive_finite(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


# ---- the tiny run ----
json_path = os.path.join(WORK, "bench.json")
if os.path.exists(json_path):
    os.remove(json_path)
cmd = [TOOL, "--shape", "tiny", "--layers", str(LAYERS), "--formats", ",".join(FORMATS), "--prompt", str(PROMPT),
       "--decode", str(DECODE), "--json", json_path]
run = subprocess.run(cmd, capture_output=True, text=True, timeout=100)
print(run.stdout)
check("exit status", run.returncode == 0, f"{run.returncode}; stderr: {run.stderr[-2000:]}")
if run.returncode != 0:
    print(f"{passed} passed, {failed} failed")
    sys.exit(1)

table_rows = {line.split()[0]: line for line in run.stdout.splitlines() if line.split()}
with open(json_path) as f:
    report = json.load(f)
check("device", report.get("device") == "cpu", report.get("device"))
check("shape", report.get("shape", {}).get("layers") == LAYERS and report["shape"].get("hidden") == HIDDEN,
      report.get("shape"))
check("prompt and decode", report.get("prompt_tokens") == PROMPT and report.get("decode_tokens") == DECODE,
      (report.get("prompt_tokens"), report.get("decode_tokens")))
bandwidth = report.get("bandwidth_gb_per_s")
check("bandwidth", positive_finite(bandwidth), bandwidth)
results = {r.get("format"): r for r in report.get("results", [])}
check("formats", sorted(results) == sorted(FORMATS), sorted(results))

for fmt in FORMATS:
    r = results.get(fmt)
    if r is None:
        continue
    check(f"{fmt} in the table", fmt in table_rows, run.stdout)
    check(f"{fmt} embedding format", r.get("embedding_format") == fmt, r.get("embedding_format"))
    for key in ("load_s", "load_gb_per_s", "prefill_tokens_per_s", "decode_tokens_per_s", "decode_ms_per_token",
                "decode_roofline_fraction", "peak_memory_bytes", "weight_bytes", "decode_weight_bytes_per_token"):
        check(f"{fmt} {key}", positive_finite(r.get(key)), r.get(key))
    timings_ok = True
    for key in ("prefill_s", "decode_s"):
        v = r.get(key)
        ok = isinstance(v, list) and len(v) == report.get("repetitions") and all(positive_finite(x) for x in v)
        check(f"{fmt} {key}", ok, v)
        timings_ok = timings_ok and ok
    total, per_token = expected_bytes(fmt)
    check(f"{fmt} weight bytes", r.get("weight_bytes") == total, f"{r.get('weight_bytes')} != expected {total}")
    check(f"{fmt} decode bytes per token", r.get("decode_weight_bytes_per_token") == per_token,
          f"{r.get('decode_weight_bytes_per_token')} != expected {per_token}")
    if not timings_ok or not all(positive_finite(r.get(k)) for k in ("load_s", "weight_bytes")):
        continue
    # Derived figures from the raw ones.
    decode_s = median(r["decode_s"])
    close = lambda a, b: math.isclose(a, b, rel_tol=1e-6)  # noqa: E731
    check(f"{fmt} prefill tokens/s", close(r["prefill_tokens_per_s"], PROMPT / median(r["prefill_s"])))
    check(f"{fmt} decode tokens/s", close(r["decode_tokens_per_s"], DECODE / decode_s))
    check(f"{fmt} ms/token", close(r["decode_ms_per_token"], decode_s / DECODE * 1e3))
    check(f"{fmt} load GB/s", close(r["load_gb_per_s"], total / r["load_s"] / 1e9))
    roofline = (per_token / (bandwidth * 1e9)) / (decode_s / DECODE)
    check(f"{fmt} roofline fraction", close(r["decode_roofline_fraction"], roofline),
          f"{r['decode_roofline_fraction']} != {roofline}")

    check(f"{fmt} KV type", r.get("kv_type") == "f32", r.get("kv_type"))  # the CPU backend's default
    check(f"{fmt} no decode graph on the CPU", r.get("decode_graph_operations_per_token") == 0,
          r.get("decode_graph_operations_per_token"))
    kv = (PROMPT + (DECODE + 1) / 2) * 2 * LAYERS * KV_HEADS * HEAD_DIM * 4  # fp32 K and V rows read per step
    check(f"{fmt} KV bytes per token", r.get("decode_kv_bytes_per_token") == int(kv),
          f"{r.get('decode_kv_bytes_per_token')} != expected {int(kv)}")
    with_kv = ((per_token + int(kv)) / (bandwidth * 1e9)) / (decode_s / DECODE)
    check(f"{fmt} roofline fraction with KV", close(r["decode_roofline_fraction_with_kv"], with_kv))
    gb_s = (per_token + int(kv)) / (decode_s / DECODE) / 1e9
    check(f"{fmt} decode GB/s", close(r.get("decode_gb_per_s", 0), gb_s), f"{r.get('decode_gb_per_s')} != {gb_s}")
    check(f"{fmt} decode GB/s in the table", f"{gb_s:.1f}" in table_rows.get(fmt, ""), table_rows.get(fmt))

# ---- a sweep of prompt lengths: one result per format and length, each with its own prompt_tokens; a bf16 KV
# cache (2 bytes per element in the K/V bytes of a step) ----
sweep_path = os.path.join(WORK, "sweep.json")
sweep = subprocess.run([TOOL, "--shape", "tiny", "--layers", "1", "--formats", "q8_0,f32", "--prompt", "3,17",
                        "--decode", "2", "--repetitions", "1", "--kv-type", "bf16", "--json", sweep_path],
                       capture_output=True, text=True, timeout=100)
check("sweep exit status", sweep.returncode == 0, sweep.stderr[-2000:])
if sweep.returncode == 0:
    with open(sweep_path) as f:
        swept = json.load(f)
    check("sweep prompt list", swept.get("prompt_tokens") == [3, 17], swept.get("prompt_tokens"))
    got = [(r.get("format"), r.get("prompt_tokens")) for r in swept.get("results", [])]
    check("sweep results", got == [("q8_0", 3), ("q8_0", 17), ("f32", 3), ("f32", 17)], got)
    for r in swept.get("results", []):
        kv = int((r.get("prompt_tokens") + 1.5) * 2 * 1 * KV_HEADS * HEAD_DIM * 2)  # 1 layer, bf16 K and V
        check("sweep KV type", r.get("kv_type") == "bf16", r.get("kv_type"))
        check("sweep bf16 KV bytes per token", r.get("decode_kv_bytes_per_token") == kv,
              f"{r.get('decode_kv_bytes_per_token')} != {kv}")
    rows = [line.split() for line in sweep.stdout.splitlines() if line.split() and line.split()[0] in ("q8_0", "f32")]
    check("sweep table rows", [(row[0], row[2], row[6]) for row in rows] ==
          [("q8_0", "bf16", "3"), ("q8_0", "bf16", "17"), ("f32", "bf16", "3"), ("f32", "bf16", "17")], sweep.stdout)

# ---- batched decode: sequences of one paged pool stepping together; the figures follow from the step times ----
batch_path = os.path.join(WORK, "batch.json")
batched = subprocess.run([TOOL, "--shape", "tiny", "--layers", "1", "--formats", "q4_k", "--prompt", "9",
                          "--decode", "3", "--repetitions", "2", "--batch", "1,3,5", "--json", batch_path],
                         capture_output=True, text=True, timeout=100)
check("batch exit status", batched.returncode == 0, batched.stderr[-2000:])
if batched.returncode == 0:
    with open(batch_path) as f:
        runs = json.load(f).get("batch_decode", [])
    check("one entry per batch size", [(r.get("format"), r.get("batch")) for r in runs] ==
          [("q4_k", 1), ("q4_k", 3), ("q4_k", 5)], runs)
    one = None
    for r in runs:
        steps = r.get("step_s", [])
        med = sorted(steps)[len(steps) // 2] if len(steps) % 2 else sum(sorted(steps)[len(steps) // 2 - 1:][:2]) / 2
        check(f"batch {r['batch']}: 2 timed runs of 3 steps after prompts of 9", len(steps) == 2 and all(
            s > 0 for s in steps + r.get("prompt_s", [])) and len(r.get("prompt_s", [])) == 2 and
            r.get("steps") == 3 and r.get("prompt_tokens") == 9, r)
        check(f"batch {r['batch']}: aggregate = batch / step", close(r["aggregate_tokens_per_s"], r["batch"] / med), r)
        check(f"batch {r['batch']}: per stream = 1 / step", close(r["per_stream_tokens_per_s"], 1 / med), r)
        one = one or r["aggregate_tokens_per_s"]
        check(f"batch {r['batch']}: ratio to batch 1",
              close(r["aggregate_vs_batch_1"], r["aggregate_tokens_per_s"] / one), r)
    rows = [line.split() for line in batched.stdout.splitlines() if line.split()[:1] == ["q4_k"]]
    check("batch table rows", [row[1] for row in rows[-3:]] == ["1", "3", "5"], batched.stdout)

# ---- the mixture-of-experts shape (Qwen3-MoE's layout): weight bytes with the stacked experts, the F32 routers and
# the per-head q/k norms; a decoded token reads the router and experts_used of the experts of every layer ----
EXPERTS, EXPERTS_USED, EXPERT_FFN = 8, 2, 256  # tiny-moe (tools/bench_model/random_model.cpp)
moe_path = os.path.join(WORK, "moe.json")
moe = subprocess.run([TOOL, "--shape", "tiny-moe", "--formats", "q4_k,bf16", "--prompt", "9", "--decode", "3",
                      "--repetitions", "1", "--batch", "1,3", "--json", moe_path], capture_output=True, text=True,
                     timeout=100)
check("moe exit status", moe.returncode == 0, moe.stderr[-2000:])
if moe.returncode == 0:
    with open(moe_path) as f:
        moe_report = json.load(f)
    shape = moe_report.get("shape", {})
    check("moe shape", (shape.get("experts"), shape.get("experts_used"), shape.get("expert_ffn"), shape.get("ffn")) ==
          (EXPERTS, EXPERTS_USED, EXPERT_FFN, 0), shape)
    check("moe header", "2 of 8 experts of 256" in moe.stdout, moe.stdout)
    for r in moe_report.get("results", []):
        fmt = r.get("format")
        q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
        attention = nbytes(fmt, q, HIDDEN) + 2 * nbytes(fmt, kv, HIDDEN) + nbytes(fmt, HIDDEN, q)
        expert = 2 * nbytes(fmt, EXPERT_FFN, HIDDEN) + nbytes(fmt, HIDDEN, EXPERT_FFN)
        router = EXPERTS * HIDDEN * 4  # F32
        norms = (2 * LAYERS + 1) * HIDDEN * 4 + 2 * LAYERS * HEAD_DIM * 4  # attn, ffn, output; q and k per head
        table = nbytes(fmt, VOCAB, HIDDEN)
        total = LAYERS * (attention + EXPERTS * expert + router) + 2 * table + norms
        per_token = LAYERS * (attention + EXPERTS_USED * expert + router) + table + nbytes(fmt, 1, HIDDEN)
        check(f"moe {fmt} weight bytes", r.get("weight_bytes") == total, f"{r.get('weight_bytes')} != {total}")
        check(f"moe {fmt} decode bytes per token", r.get("decode_weight_bytes_per_token") == per_token,
              f"{r.get('decode_weight_bytes_per_token')} != {per_token}")
        check(f"moe {fmt} figures", all(positive_finite(r.get(k)) for k in
                                        ("prefill_tokens_per_s", "decode_tokens_per_s", "decode_roofline_fraction")), r)
    check("moe batched decode", [(r.get("format"), r.get("batch")) for r in moe_report.get("batch_decode", [])] ==
          [("q4_k", 1), ("q4_k", 3), ("bf16", 1), ("bf16", 3)], moe_report.get("batch_decode"))

# ---- bad arguments ----
bad = subprocess.run([TOOL, "--shape", "tiny", "--batch", "1,0"], capture_output=True, text=True, timeout=60)
check("batch size 0 is refused by the option parser", bad.returncode != 0 and "--batch" in bad.stderr, bad.stderr)
for name, args, expect in (
        ("unknown format", ["--shape", "tiny", "--formats", "q4_k,nosuchformat"], "nosuchformat"),
        ("unknown shape", ["--shape", "llama9"], "llama9"),
        ("unknown KV type", ["--shape", "tiny", "--kv-type", "q4"], "kv-type")):
    bad = subprocess.run([TOOL, "--prompt", "2", "--decode", "1"] + args, capture_output=True, text=True, timeout=60)
    lines = bad.stderr.strip().splitlines()
    check(f"{name}: exit status 1", bad.returncode == 1, bad.returncode)
    check(f"{name}: one error line", len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0],
          bad.stderr)
    check(f"{name}: nothing on stdout", bad.stdout == "", bad.stdout)

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
