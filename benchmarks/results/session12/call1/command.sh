#!/usr/bin/env bash
# session 12 call 1: build every family; compute-sanitizer (4 tools) over fused, ebm and the bad-input
# sweep (session 11's launcher and separable-score changes) alongside the whole suite.
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
STEPS="build" bash tools/gpu_check.sh > "$OUT/build.out" 2>&1; grep "step\|Error\|torch\|H200\|H100" "$OUT/build.out"
SANITIZE_TESTS="tests/test_fused.py tests/test_ebm.py tests/test_bad_input.py" SANITIZE_SHARDS=3 \
  SANITIZE_TIMEOUT=420 SANITIZE_TEST_TIMEOUT=300 OUT="$OUT" bash tools/sanitize.sh > "$OUT/san.out" 2>&1 &
san=$!
STEPS="tests" TEST_WORKERS=4 timeout 470 bash tools/gpu_check.sh > "$OUT/tests.out" 2>&1
grep -E "passed|failed" "$OUT/pytest.log" | tail -3
wait $san
cat "$OUT/sanitize.log"
(cd "$OUT" && tar -czf /tmp/logs.tgz --exclude="*.tgz" . && find . -type f ! -name "*.tgz" ! -name pytest.log ! -name sanitize.log ! -name "*times.log" -delete && mv /tmp/logs.tgz logs.tgz)
