"""bench/serve-bench.py against serve-model on stories260K at tiny sizes: every level reports its requests, positive
speeds and time to first token, and the JSON carries the same figures (the script must not rot between GPU runs).

usage: test_serve_bench.py <serve-model> <work dir>"""
import json
import os
import subprocess
import sys

SERVE, WORK = sys.argv[1], sys.argv[2]
DATA = os.environ.get("QRT_TEST_DATA", "")
GGUF = os.path.join(DATA, "stories260K", "stories260K.gguf")
if not os.path.isfile(GGUF):
    print(f"skipped: stories260K not found under QRT_TEST_DATA={DATA!r}")
    sys.exit(77)
os.makedirs(WORK, exist_ok=True)
script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench", "serve-bench.py")
out = os.path.join(WORK, "serve-bench.json")
run = subprocess.run([sys.executable, script, "--serve-model", SERVE, GGUF, "--streams", "1,3", "--max-tokens", "16",
                      "--requests-per-stream", "2", "--json", out], capture_output=True, text=True, timeout=300)
print(run.stdout, run.stderr)
failures = []
if run.returncode != 0:
    failures.append(f"exit code {run.returncode}")
else:
    levels = json.load(open(out))["levels"]
    if [lv["streams"] for lv in levels] != [1, 3] or [lv["requests"] for lv in levels] != [2, 6]:
        failures.append(f"levels {levels}")
    for lv in levels:
        if not (lv["aggregate_tokens_per_second"] > 0 and lv["per_stream_tokens_per_second"] > 0 and
                0 < lv["ttft_ms_median"] <= lv["ttft_ms_p90"] and lv["tokens_per_request"] == 16):
            failures.append(f"level {lv}")
    if "| streams | requests |" not in run.stdout:
        failures.append("no table on stdout")
print("\n".join(failures) or "ok")
sys.exit(1 if failures else 0)
