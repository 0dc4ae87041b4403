#!/usr/bin/env bash
# compute-sanitizer over the GPU test suite: every CUDA test of every family's test file, the bad-input
# sweep (every op with valid, non-contiguous, NaN, zero-row and rejected input) and the determinism
# tests, under memcheck, racecheck, initcheck and synccheck. Left out: CUDA-graph tests (below) and
# torch.compile tests (inductor's own kernels, minutes of compiling under the tools). One log per tool
# under $OUT, one summary line per tool in $OUT/sanitize.log.
#   TOOLS="memcheck" SANITIZE_TESTS="tests/test_fused.py" to narrow; SANITIZE_TIMEOUT (s) per tool;
#   SANITIZE_TEST_TIMEOUT (s, pytest-timeout) per test, so one slow test shows as a failure with its
#   name instead of eating the tool's time, and --durations lists where the time went.
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
# One process per tool and group of test files, side by side (the machine has the cores; the slowest
# process sets the wall time). ebm's statistical chain tests are the longest group.
run_tool() {
  local tool=$1 name=$2 start rc summary log
  shift 2
  log="$OUT/sanitize_${tool}_$name.log"
  start=$(date +%s)
  local filter=("${EXCLUDE[@]}")
  [ "$tool" = initcheck ] && filter=()
  timeout "${SANITIZE_TIMEOUT:-1800}" "$SANITIZER" --tool "$tool" --print-limit 20 --error-exitcode 99 "${filter[@]}" \
    python3 -m pytest -q -p no:cacheprovider -p no:xdist -k "cuda and not graph and not compile" \
    --timeout="${SANITIZE_TEST_TIMEOUT:-120}" --durations=25 "$@" > "$log" 2>&1
  rc=$?
  summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$log" | tail -2 | tr '\n' ' ')
  # Cut off by the timeout: how far pytest got, and any error the tool printed before that.
  [ "$rc" = 124 ] && summary="TIMED OUT at $(grep -o '\[ *[0-9]*%\]' "$log" | tail -1);\
 $(grep -cE '^========= (Invalid|Uninitialized|Race|Barrier|Program hit|Error)' "$log") error lines so far"
  echo "$tool $name: exit $rc, $(( $(date +%s) - start )) s; $summary" | tee -a "$OUT/sanitize.log"
  return $rc
}
pids=()
for tool in $TOOLS; do
  if [ -n "${SANITIZE_TESTS:-}" ]; then
    run_tool "$tool" tests $TESTS & pids+=($!)
  else
    run_tool "$tool" ebm tests/test_ebm.py & pids+=($!)
    run_tool "$tool" rest ${TESTS/tests\/test_ebm.py/} & pids+=($!)
  fi
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
exit $status
