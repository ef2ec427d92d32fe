#!/usr/bin/env bash
# The fast decode GEMV kernels on a GPU, in as few device calls as possible (see bench/NOTES-gemv.md):
#   bench/gemv-gpu-session.sh build   configure (native arch, Release) and build only what the GEMV checks need
#   bench/gemv-gpu-session.sh test    CPU emulation + GPU tests, then compute-sanitizer on a slice of the GPU tests
#   bench/gemv-gpu-session.sh sass    per-kernel registers/spills and SASS facts (LDGSTS, LDS, no LDL/STL)
#   bench/gemv-gpu-session.sh bench   copy roofline + gemv and gemv_generic for the fast formats, medians
#   bench/gemv-gpu-session.sh all     all four in order
# Logs go to $OUT when set, else build-gemv-gpu/results; a short table is printed last. Needs the staged
# dependencies (.deps-stage from third_party/stage-deps) on a machine without the Debian packages.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-gemv-gpu
out=${OUT:-$build/results}
mkdir -p "$out"
step=${1:-all}
formats='q4_0|q8_0|q4_k|q5_k|q6_k|afq4|afq8|mxfp4'

do_build() {
  local deps=()
  { [ ! -f /usr/include/nlohmann/json.hpp ] || [ ! -f /usr/include/pcre2.h ]; } && [ -d "$root/.deps-stage" ] && deps=(-DQRT_DEPS_ROOT="$root/.deps-stage")
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQRT_CUDA=ON -DQRT_MPI=OFF -DQRT_NCCL=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=native "${deps[@]}" >"$out/configure.log" 2>&1 ||
    { tail -30 "$out/configure.log"; return 1; }
  cmake --build "$build" -j "$(nproc)" --target qrt_gpu_gemv_fast_tests qrt_gemv_lanes_tests qrt_gpu_bench \
    >"$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" | head -40; return 1; }
  grep -E "spill|Registers are spilled" "$out/build.log" | sort -u | head -20
  echo "build: ok"
}

do_test() {
  (cd "$build" && ctest -R 'GemvLanes|GemvFast|GemvDispatch' --output-on-failure -j 8 >"$out/ctest.log" 2>&1)
  local rc=$?
  grep -E "tests passed|tests failed" "$out/ctest.log" | tail -1
  sed -n '/The following tests FAILED/,$p' "$out/ctest.log" | head -30
  # One case per kernel family under the sanitizers: out-of-bounds or misaligned accesses, shared-memory races
  # between lanes (cp.async ring, prepare scratch), barrier misuse.
  local filter='Formats/GemvFast.MatchesCpuReference/*_37x*:Formats/GemvFast.MatchesCpuReference/*_4229x*'
  for tool in memcheck racecheck synccheck; do
    compute-sanitizer --tool $tool --error-exitcode 9 "$build/tests/gpu/gemv_fast/qrt_gpu_gemv_fast_tests" --gtest_filter="$filter" \
      >"$out/sanitizer-$tool.log" 2>&1
    echo "compute-sanitizer $tool: rc=$? $(grep -E 'ERROR SUMMARY' "$out/sanitizer-$tool.log" | tail -1)"
  done
  return $rc
}

do_sass() {
  local obj
  obj=$(find "$build" -name 'gemv_ggml.cu.o' -o -name 'gemv_afq.cu.o' -o -name 'gemv_mx.cu.o' | tr '\n' ' ')
  # shellcheck disable=SC2086
  cuobjdump -res-usage $obj >"$out/res-usage.txt" 2>&1
  # shellcheck disable=SC2086
  cuobjdump -sass $obj >"$out/gemv-fast.sass" 2>&1
  echo "SASS: LDGSTS $(grep -c LDGSTS "$out/gemv-fast.sass"), LDS $(grep -c ' LDS' "$out/gemv-fast.sass")," \
    "LDG.E.128 $(grep -c 'LDG.E.128' "$out/gemv-fast.sass"), LDL/STL $(grep -cE ' (LDL|STL)' "$out/gemv-fast.sass")," \
    "I2F $(grep -c ' I2F' "$out/gemv-fast.sass")"
  # One line per kernel instance: mangled name (policy, batch) with REG and STACK.
  grep -E "Function|REG" "$out/res-usage.txt" | paste - - | grep gemv_staged |
    sed -E 's/.*gemv_lanes[0-9]+([A-Za-z0-9_]+)(.*)Li([0-9])EEEv.*(REG:[0-9]+).*(STACK:[0-9]+).*/\1\2 m=\3 \4 \5/' |
    head -80
}

do_bench() {
  "$build/bin/qrt_gpu_bench" \
    --benchmark_filter="roofline/copy|^gemv(_generic)?/($formats)/" \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_out="$out/gemv-bench.json" --benchmark_out_format=json >"$out/gemv-bench.txt" 2>&1
  echo "bench rc=$?"
  # Medians of batch 1 and 8 (time, bytes/s, pct_of_copy_bw, kernel label) and the copy roofline.
  grep -E "_median" "$out/gemv-bench.txt" | grep -E "batch:(1|8)/|copy" | sed -E 's/ +/ /g' | cut -c1-160 | head -150
}

case $step in
  build) do_build ;;
  test) do_test ;;
  sass) do_sass ;;
  bench) do_bench ;;
  all) do_build && { do_test; do_sass; do_bench; } ;;
  *) echo "usage: $0 build|test|sass|bench|all" >&2; exit 2 ;;
esac
