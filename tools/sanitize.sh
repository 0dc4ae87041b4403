#!/usr/bin/env bash
# compute-sanitizer over the GPU test suite: every CUDA test of every family's test file, the bad-input
# sweep (every op with valid, non-contiguous, NaN, zero-row and rejected input) and the determinism
# tests, under memcheck, racecheck, initcheck and synccheck. Left out: CUDA-graph tests (below) and
# torch.compile tests (inductor's own kernels, minutes of compiling under the tools). One log per tool
# under $OUT, one summary line per tool in $OUT/sanitize.log.
#   TOOLS="memcheck" SANITIZE_TESTS="tests/test_fused.py" to narrow; SANITIZE_TIMEOUT (s) per tool;
#   SANITIZE_TEST_TIMEOUT (s, pytest-timeout) per test, so one slow test shows as a failure with its
#   name instead of eating the tool's time; SANITIZE_SHARDS processes per tool.
set -u -o pipefail
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
SANITIZER=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
TOOLS=${TOOLS:-memcheck racecheck initcheck synccheck}
TESTS=${SANITIZE_TESTS:-tests/test_fused.py tests/test_ebm.py tests/test_sampling.py tests/test_diffusion.py \
  tests/test_linalg.py tests/test_bad_input.py tests/test_determinism.py}
# Without the caching allocator memcheck sees each tensor's true bounds. CUDA graphs need the
# caching allocator, so the graph tests are left out here (they run in the normal suite).
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
# memcheck, racecheck and synccheck check only our kernels: PyTorch's own (at::native), cuBLAS's and
# cuDNN's are excluded by name (none of ours carries these words), which makes them several times
# faster (session 8: without it, memcheck had done 12% of the suite in 520 s). initcheck checks every
# kernel: it must see the writes of PyTorch's kernels (randn, copies), or it calls every input
# uninitialized (with the exclusion it did, falsely). SANITIZE_ALL_KERNELS=1 checks everything.
EXCLUDE=()
[ "${SANITIZE_ALL_KERNELS:-0}" = 1 ] || for word in native gemm xmma cutlass cudnn cublas nchw nhwc sm90_ sm80_; do
  EXCLUDE+=(--kernel-name-exclude "kns=$word")
done
# Each tool runs in SANITIZE_SHARDS processes side by side, every one taking every n-th test
# (tests/conftest.py, JK_TEST_SHARD); each test's seconds go to sanitize_<tool>_times.log as it ends.
SHARDS=${SANITIZE_SHARDS:-4}
run_shard() {
  local tool=$1 shard=$2
  local filter=("${EXCLUDE[@]}")
  [ "$tool" = initcheck ] && filter=()
  JK_TEST_SHARD="$shard/$SHARDS" JK_TEST_TIMES="$OUT/sanitize_${tool}_times.log" \
    timeout "${SANITIZE_TIMEOUT:-1800}" "$SANITIZER" --tool "$tool" --print-limit 20 --error-exitcode 99 \
    "${filter[@]}" python3 -m pytest -q -p no:cacheprovider -p no:xdist -k "cuda and not graph and not compile" \
    --timeout="${SANITIZE_TEST_TIMEOUT:-120}" $TESTS > "$OUT/sanitize_${tool}_$shard.log" 2>&1
}
# One summary line per tool: tests run, error lines the tool printed, and any shard cut off.
summarize() {
  local tool=$1 seconds=$2 logs=("$OUT/sanitize_${tool}_"[0-9]*.log)
  local passed failed errors cut
  passed=$(cat "$OUT/sanitize_${tool}_times.log" 2>/dev/null | grep -c " passed ")
  failed=$(cat "$OUT/sanitize_${tool}_times.log" 2>/dev/null | grep -c " failed ")
  errors=$(cat "${logs[@]}" | grep -cE '^========= (Invalid|Uninitialized|Race|Barrier|Program hit|Error|Unused|Divergent)')
  cut=$(grep -L -E "ERROR SUMMARY|RACECHECK SUMMARY" "${logs[@]}" | wc -l)
  echo "$tool: $SHARDS shards, ${seconds} s; $passed passed, $failed failed; $errors error lines;\
 $cut shard(s) without the tool's summary (cut off)" | tee -a "$OUT/sanitize.log"
  [ "$errors" = 0 ] && [ "$failed" = 0 ] && [ "$cut" = 0 ] && [ "$passed" -gt 0 ]  # ran something, all clean
}
start=$(date +%s)
pids=()
for tool in $TOOLS; do
  for shard in $(seq 0 $((SHARDS - 1))); do run_shard "$tool" "$shard" & pids+=($!); done
done
for pid in "${pids[@]}"; do wait "$pid"; done
status=0
for tool in $TOOLS; do summarize "$tool" $(( $(date +%s) - start )) || status=1; done
# The slowest tests, for the next run's planning.
for tool in $TOOLS; do
  echo "slowest under $tool:"; sort -rn "$OUT/sanitize_${tool}_times.log" 2>/dev/null | head -8
done | tee -a "$OUT/sanitize.log"
exit $status
