#!/usr/bin/env bash
# session 12 call 7: linalg's diagonal finish as two kernels (was ~13 ATen ops) and the memoized Newton schedule:
# linalg tests on CUDA, the 4 sanitizers over the inverse-root tests that run fast under them and the
# bad-input sweep's inverse-root cases, then the host-bound probe and the harness rows again
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
STEPS="build" bash tools/gpu_check.sh > "$OUT/build.out" 2>&1; grep "step\|Error\|H200\|torch" "$OUT/build.out"
python3 -m pytest -q -p no:cacheprovider -n 4 --timeout=300 tests/test_linalg.py tests/test_sanitize_summary.py 2>&1 | tail -3 | tee "$OUT/pytest_linalg.log"
SANITIZE_TESTS="tests/test_linalg.py tests/test_bad_input.py" SANITIZE_K="diagonal_members or identity_is_exact or sizes_and_eps or ignores_tf32 or inverse_root_bad_input or schedule_memo or matrix_inverse_root" \
  SANITIZE_SHARDS=2 SANITIZE_BALANCE= SANITIZE_TIMEOUT=240 OUT="$OUT" timeout 250 bash tools/sanitize.sh > "$OUT/san.out" 2>&1
grep -v "^ " "$OUT/sanitize.log"
timeout 150 python3 scratch/linalg_probe.py 2>&1 | grep -v Warn | tee "$OUT/linalg_probe_after.log"
timeout 150 python3 benchmarks/run.py --families linalg --out "$OUT/bench" --match "matrix_inverse_root" 2>&1 | grep -E "^linalg|copy rate" | tee "$OUT/bench_rows.log"
(cd "$OUT" && tar -czf /tmp/logs.tgz --exclude="*.tgz" . && find . -type f ! -name "*.tgz" ! -name sanitize.log ! -name "pytest_linalg.log" ! -name "linalg_probe_after.log" ! -name bench_rows.log -delete && mv /tmp/logs.tgz logs.tgz)
