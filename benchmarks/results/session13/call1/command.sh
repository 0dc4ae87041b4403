#!/usr/bin/env bash
# session 13, call 1: cold build of every family, load times (machine otherwise idle), the cache packed for call 2
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
STEPS="build" bash tools/gpu_check.sh > "$OUT/build.out" 2>&1; grep "step\|Error\|H200\|H100\|torch" "$OUT/build.out"
STEPS="load" bash tools/gpu_check.sh > "$OUT/load.out" 2>&1; cat "$OUT/load.out"
for i in $(seq 12); do env -u PYTHONDONTWRITEBYTECODE python3 benchmarks/results/session13/call1/load_stages.py; done 2>&1 | tee "$OUT/load_stages.log"
STEPS="pack" bash tools/gpu_check.sh > /dev/null 2>&1; ls -la "$OUT"
