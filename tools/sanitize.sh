#!/usr/bin/env bash
# compute-sanitizer over the GPU test suite: every CUDA test of every family's test file, the bad-input
# sweep (every op with valid, non-contiguous, NaN, zero-row and rejected input) and the determinism
# tests, under memcheck, racecheck, initcheck and synccheck. Left out: CUDA-graph tests (below) and
# torch.compile tests (inductor's own kernels, minutes of compiling under the tools). One log per tool
# and shard under $OUT, one verdict per tool in $OUT/sanitize.log (tools/sanitize_summary.py).
#   TOOLS="memcheck" SANITIZE_TESTS="tests/test_fused.py" SANITIZE_K="relu_add" (a pytest -k expression) to narrow; SANITIZE_TIMEOUT (s) per tool;
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
# Session 9 added cuBLAS's Hopper GEMMs (nvjet_*), its gemv and split-K kernels and cuSOLVER/MAGMA's
# (linalg's eigh reference): the linalg tests were the slowest under memcheck. None of our 431 kernel
# symbols (every family, sm_90a) contains any of these words. But racecheck keeps cuBLAS's Hopper
# GEMMs (nvjet_sm90_*) instrumented: skipping one makes it fail with "The Sanitizer failed to handle a
# hardware exception" and the process with an illegal address, with torch alone (a bf16 bmm;
# results/session10/diag). Their hazards count as another library's.
exclusions() {
  local tool=$1 word
  if [ "${SANITIZE_ALL_KERNELS:-0}" = 1 ] || [ "$tool" = initcheck ]; then return; fi
  for word in native gemm xmma cutlass cudnn cublas nchw nhwc sm90_ sm80_ nvjet gemv splitKreduce syevd sytrd ormtr \
      stedc magma cusolver; do
    if [ "$tool" = racecheck ] && { [ "$word" = nvjet ] || [ "$word" = sm90_ ]; }; then continue; fi
    printf -- "--kernel-name-exclude kns=%s " "$word"
  done
}
# Each tool runs in SANITIZE_SHARDS processes side by side, each taking a share of the tests balanced
# by an earlier run's times, longest first (tests/conftest.py: JK_TEST_SHARD, JK_TEST_BALANCE;
# SANITIZE_BALANCE= to take every n-th test instead); SANITIZE_SHARD_LIST="0 1 2" runs only those
# shards, so one tool can be spread over several device calls. Each test's seconds go to
# sanitize_<tool>_times.log (the next run's SANITIZE_BALANCE).
# Every report is printed without backtraces (pytest -v names the test it belongs to) and
# tools/sanitize_summary.py sorts them into our kernels' and other libraries'.
SHARDS=${SANITIZE_SHARDS:-4}
SHARD_LIST=${SANITIZE_SHARD_LIST:-$(seq 0 $((SHARDS - 1)))}
BALANCE=${SANITIZE_BALANCE-benchmarks/results/session9/sanitize_a/sanitize_memcheck_times.log}
# A tool's coverage can be built up over several device calls: SANITIZE_RESUME="dir dir:regex ..."
# leaves out the tests that passed under the same tool in those earlier runs, except, for a dir:regex,
# the tests matching the regex (kernels changed since). tools/sanitize_coverage.py report <same dirs>
# says what each tool has covered.
already_passed() {
  [ -n "${SANITIZE_RESUME:-}" ] && python3 tools/sanitize_coverage.py passed "$1" $SANITIZE_RESUME
}
run_shard() {
  local tool=$1 shard=$2 test_id
  local filter skip=()
  read -ra filter <<< "$(exclusions "$tool")"
  for test_id in $(already_passed "$tool"); do skip+=(--deselect "$test_id"); done
  # synccheck calls every barrier of a 16-block (non-portable) cluster divergent, even in a kernel of
  # straight-line __syncthreads (results/session9/synccheck_cluster): under it, conv1d_gn_mish keeps to
  # clusters of <= 8 blocks (larger groups take the unfused path), which it can check.
  local portable=0
  [ "$tool" = synccheck ] && portable=1
  # initcheck cannot see cuBLAS's Hopper GEMMs write their output, so linalg's inverse root puts its
  # products into zero-filled outputs under it (the same results; tests/test_linalg.py): every later
  # read of a product is then initialized in the tool's eyes, and it checks the rest of what we read.
  local prefill=0
  [ "$tool" = initcheck ] && prefill=1
  # racecheck dies ("failed to handle a hardware exception", taking the rest of its shard) on cuDNN's
  # Hopper convolution for the large half-type case of test_conv1d_gn_mish_cudnn_cuda (session 15,
  # results/session15/call10), as on cuBLAS's nvjet GEMMs when excluded: that case is left out under
  # it; the same GroupNorm + Mish variant (n = 1024) is checked by the 16x32x64x16x5x1 case.
  local tool_k=""
  [ "$tool" = racecheck ] && tool_k=" and not 256x256x512x16x5x8"
  JITKERNELS_SANITIZE_PREFILL=$prefill JITKERNELS_PORTABLE_CLUSTERS=$portable JK_TEST_SHARD="$shard/$SHARDS" JK_TEST_BALANCE="$BALANCE" \
    JK_TEST_TIMES="$OUT/sanitize_${tool}_times.log" \
    timeout "${SANITIZE_TIMEOUT:-1800}" "$SANITIZER" --tool "$tool" --print-limit 1000000 --show-backtrace no \
    --error-exitcode 99 "${filter[@]}" python3 -m pytest -v -p no:cacheprovider -p no:xdist \
    -k "cuda and not graph and not compile$tool_k${SANITIZE_K:+ and ($SANITIZE_K)}" --timeout="${SANITIZE_TEST_TIMEOUT:-300}" "${skip[@]}" $TESTS \
    > "$OUT/sanitize_${tool}_$shard.log" 2>&1
}
start=$(date +%s)
pids=()
for tool in $TOOLS; do
  for shard in $SHARD_LIST; do run_shard "$tool" "$shard" & pids+=($!); done
done
for pid in "${pids[@]}"; do wait "$pid"; done
status=0
for tool in $TOOLS; do
  python3 tools/sanitize_summary.py "$tool" $(( $(date +%s) - start )) "$OUT/sanitize_${tool}_times.log" \
    "$OUT/sanitize_${tool}_"[0-9]*.log | tee -a "$OUT/sanitize.log" || status=1
done
# The slowest tests, for the next run's planning.
for tool in $TOOLS; do
  echo "slowest under $tool:"; sort -rn "$OUT/sanitize_${tool}_times.log" 2>/dev/null | head -8
done | tee -a "$OUT/sanitize.log"
exit $status
