#!/usr/bin/env bash
# session 12 call 2 (warm machine, cache built): compute-sanitizer (4 tools x 4 shards) over fused, ebm and the bad-input sweep
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
STEPS="build" bash tools/gpu_check.sh > "$OUT/build.out" 2>&1; grep "step\|Error" "$OUT/build.out"
SANITIZE_TESTS="tests/test_fused.py tests/test_ebm.py tests/test_bad_input.py" SANITIZE_SHARDS=4 \
  SANITIZE_TIMEOUT=480 SANITIZE_TEST_TIMEOUT=300 OUT="$OUT" timeout 540 bash tools/sanitize.sh > "$OUT/san.out" 2>&1
cat "$OUT/sanitize.log"
(cd "$OUT" && tar -czf /tmp/logs.tgz --exclude="*.tgz" . && find . -type f ! -name "*.tgz" ! -name sanitize.log ! -name "*times.log" -delete && mv /tmp/logs.tgz logs.tgz)
