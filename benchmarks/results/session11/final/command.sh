#!/usr/bin/env bash
# session 11 final call: build every family, the separable-score rows of the harness, the whole suite
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
STEPS="build" bash tools/gpu_check.sh > "$OUT/build.out" 2>&1; grep "step\|Error" "$OUT/build.out"
timeout 120 python3 benchmarks/run.py --families ebm --out "$OUT/bench" --match "harmonic_score" "double_well_score" "rastrigin_score" 2>&1 | grep -E "^ebm|copy rate" | tee "$OUT/bench_scores.log"
STEPS="tests" TEST_WORKERS=6 bash tools/gpu_check.sh > "$OUT/tests.out" 2>&1
grep -E "passed|failed" "$OUT/pytest.log" | tail -3
(cd "$OUT" && tar -czf /tmp/logs.tgz --exclude="*.tgz" . && find . -type f ! -name "*.tgz" ! -name pytest.log ! -name bench_scores.log -delete && mv /tmp/logs.tgz logs.tgz)
