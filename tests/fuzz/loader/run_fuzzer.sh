#!/usr/bin/env bash
# Bounded libFuzzer run for ctest: run_fuzzer.sh <fuzzer binary> <gguf|safetensors|uqff> <python> <seconds> <work dir>
# Makes the seed corpus, fuzzes for <seconds>, and fails when the fuzzer finds a crash, leak, timeout or an
# allocation over the memory limit; the reproducer is left in <work dir>/artifacts/ and its path printed with the
# command that replays it.
set -uo pipefail
fuzzer=$1 kind=$2 python=$3 seconds=$4 work=$5
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work/seeds" "$work/corpus" "$work/artifacts"
mkdir -p "$work/seeds" "$work/corpus" "$work/artifacts"
"$python" "$here/make_corpus.py" "$kind" "$work/seeds" || exit 1
if [ -z "$(ls -A "$work/seeds")" ]; then
  echo "run_fuzzer: no seeds were made for $kind (is the oracle environment .venv set up?)" >&2
  exit 1
fi
# Symbolized stacks in reports, when an llvm-symbolizer is installed.
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then
  for s in "$(command -v llvm-symbolizer || true)" /usr/lib/llvm-*/bin/llvm-symbolizer; do
    if [ -n "$s" ] && [ -x "$s" ]; then export ASAN_SYMBOLIZER_PATH=$s; break; fi
  done
fi
"$fuzzer" -max_total_time="$seconds" -max_len=32768 -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" "$work/seeds"
rc=$?
if [ $rc -ne 0 ]; then
  echo "run_fuzzer: $kind fuzzer failed (exit $rc)" >&2
  for f in "$work"/artifacts/*; do
    [ -e "$f" ] || continue
    echo "run_fuzzer: reproducer $f (replay: $fuzzer $f)" >&2
  done
  exit 1  # not libFuzzer's 77, which would read as "skipped" where a skip code is set
fi
