#!/usr/bin/env bash
# compute-sanitizer over every CUDA kernel we launch: the CUDA cases of the bad-input sweep (every
# op with valid, non-contiguous, NaN, zero-row and rejected input) and the determinism tests, under
# memcheck, racecheck, initcheck and synccheck. One log per tool under $OUT, and one summary line
# per tool in $OUT/sanitize.log.   TOOLS="memcheck" SANITIZE_TESTS="tests/test_fused.py" to narrow.
set -u -o pipefail
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
SANITIZER=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
TOOLS=${TOOLS:-memcheck racecheck initcheck synccheck}
TESTS=${SANITIZE_TESTS:-tests/test_bad_input.py tests/test_determinism.py}
# Without the caching allocator memcheck sees each tensor's true bounds. CUDA graphs need the
# caching allocator, so the graph tests are left out here (they run in the normal suite).
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
# The tools run side by side (one process each): the machine has the cores, and the slowest
# tool sets the wall time instead of the sum.
run_tool() {
  local tool=$1 start rc summary
  start=$(date +%s)
  "$SANITIZER" --tool "$tool" --print-limit 20 --error-exitcode 99 \
    python3 -m pytest -q -p no:cacheprovider -p no:xdist -k "cuda and not graph" $TESTS > "$OUT/sanitize_$tool.log" 2>&1
  rc=$?
  summary=$(grep -E "ERROR SUMMARY|passed|failed" "$OUT/sanitize_$tool.log" | tail -2 | tr '\n' ' ')
  echo "$tool: exit $rc, $(( $(date +%s) - start )) s; $summary" | tee -a "$OUT/sanitize.log"
  return $rc
}
pids=()
for tool in $TOOLS; do run_tool "$tool" & pids+=($!); done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
exit $status
