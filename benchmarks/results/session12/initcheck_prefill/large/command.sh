#!/usr/bin/env bash
# session 12: initcheck with the GEMM outputs prefilled over the n=1500 and n=4096 inverse-root tests (one per process)
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
FAMILIES=linalg STEPS="build" bash tools/gpu_check.sh 2>&1 | grep -E "step|Error"
SANITIZE_TESTS="tests/test_linalg.py" SANITIZE_K="1500 or 4096" TOOLS=initcheck SANITIZE_SHARDS=6 SANITIZE_BALANCE= \
  SANITIZE_TIMEOUT=270 SANITIZE_TEST_TIMEOUT=265 OUT="$OUT" timeout 280 bash tools/sanitize.sh > "$OUT/san.out" 2>&1
cat "$OUT/sanitize.log" | head -30
(cd "$OUT" && tar -czf /tmp/logs.tgz --exclude="*.tgz" . && find . -type f ! -name "*.tgz" ! -name sanitize.log ! -name "*times.log" -delete && mv /tmp/logs.tgz logs.tgz)
