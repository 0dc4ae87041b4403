#!/usr/bin/env bash
# session 13, call 1: cold build of every family, load times (machine otherwise idle), the whole suite
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
STEPS="build" bash tools/gpu_check.sh > "$OUT/build.out" 2>&1; grep "step\|Error\|H200\|H100\|torch" "$OUT/build.out"
STEPS="load" bash tools/gpu_check.sh > "$OUT/load.out" 2>&1; cat "$OUT/load.out"
STEPS="tests" TEST_WORKERS=6 timeout 300 bash tools/gpu_check.sh > "$OUT/tests.out" 2>&1; grep -E "FAILED|ERROR|passed|failed" "$OUT/pytest.log" | tail -8
(cd "$OUT" && tar -czf /tmp/logs.tgz --exclude="*.tgz" . && find . -type f ! -name "*.tgz" ! -name pytest.log ! -name load_time.json ! -name run.log -delete && mv /tmp/logs.tgz logs.tgz; ls)
