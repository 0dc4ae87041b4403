#!/usr/bin/env bash
# session 11 last call: the shared launcher at 128 threads x 2 vectors: build, fused + separable-score rows, whole suite
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
STEPS="build" bash tools/gpu_check.sh > "$OUT/build.out" 2>&1; grep "step\|Error" "$OUT/build.out"
timeout 150 python3 benchmarks/run.py --families fused ebm --out "$OUT/bench" --match "relu_add" "harmonic_score" "double_well_score" "rastrigin_score" 2>&1 | grep -E "^(ebm|fused)|copy rate" | tee "$OUT/bench_rows.log"
STEPS="tests" TEST_WORKERS=6 bash tools/gpu_check.sh > "$OUT/tests.out" 2>&1
grep -E "passed|failed" "$OUT/pytest.log" | tail -3
(cd "$OUT" && tar -czf /tmp/logs.tgz --exclude="*.tgz" . && find . -type f ! -name "*.tgz" ! -name pytest.log ! -name bench_rows.log -delete && mv /tmp/logs.tgz logs.tgz)
