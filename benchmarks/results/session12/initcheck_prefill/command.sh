#!/usr/bin/env bash
# session 12: initcheck over linalg's inverse-root tests with the GEMM outputs prefilled (JITKERNELS_SANITIZE_PREFILL)
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
FAMILIES=linalg STEPS="build" bash tools/gpu_check.sh 2>&1 | grep -E "step|Error"
timeout 120 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_linalg.py -k "prefill or diagonal_members or identity" 2>&1 | tail -2 | tee "$OUT/pytest_prefill.log"
SANITIZE_TESTS="tests/test_linalg.py" SANITIZE_K="(inverse_root or shampoo) and not 4096 and not 1500 and not converges" TOOLS=initcheck \
  SANITIZE_SHARDS=8 SANITIZE_BALANCE=benchmarks/results/session10/call1/sanitize_initcheck_times.log SANITIZE_TIMEOUT=330 \
  SANITIZE_TEST_TIMEOUT=320 OUT="$OUT" timeout 340 bash tools/sanitize.sh > "$OUT/san.out" 2>&1
cat "$OUT/sanitize.log" | head -30
(cd "$OUT" && tar -czf /tmp/logs.tgz --exclude="*.tgz" . && find . -type f ! -name "*.tgz" ! -name sanitize.log ! -name pytest_prefill.log ! -name "*times.log" -delete && mv /tmp/logs.tgz logs.tgz)
