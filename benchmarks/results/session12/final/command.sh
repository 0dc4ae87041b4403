#!/usr/bin/env bash
# session 12 last call: the whole suite and the whole harness on the final code (linalg's diagonal finish included)
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
STEPS="build" bash tools/gpu_check.sh > "$OUT/build.out" 2>&1; grep "step\|Error\|H200\|torch" "$OUT/build.out"
STEPS="tests" TEST_WORKERS=6 timeout 290 bash tools/gpu_check.sh > "$OUT/tests.out" 2>&1; grep -E "passed|failed" "$OUT/pytest.log" | tail -3
STEPS="bench" bash tools/gpu_check.sh 2>&1 | grep -E "step|copy rate|Error|matrix_inverse|Shampoo"
(cd "$OUT" && tar -czf /tmp/logs.tgz --exclude="*.tgz" --exclude="*.png" . && find . -type f ! -name "*.tgz" ! -name pytest.log ! -name "nvidia-h200.*" ! -name cpu_vs_gpu.md ! -name run.log -delete && mv /tmp/logs.tgz logs.tgz; ls)
