#!/usr/bin/env bash
# Bounded libFuzzer run for ctest: run_fuzzer.sh <fuzzer binary> <gguf|safetensors> <python> <seconds> <work dir>
# Makes the seed corpus, fuzzes for <seconds>, and fails when the fuzzer finds a crash, leak, timeout or an
# allocation over the memory limit (the reproducer is left in <work dir>/artifacts/).
set -euo pipefail
fuzzer=$1 kind=$2 python=$3 seconds=$4 work=$5
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work/seeds" "$work/corpus"
mkdir -p "$work/seeds" "$work/corpus" "$work/artifacts"
"$python" "$here/make_corpus.py" "$kind" "$work/seeds"
exec "$fuzzer" -max_total_time="$seconds" -max_len=32768 -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" "$work/seeds"
