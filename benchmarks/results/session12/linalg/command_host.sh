#!/usr/bin/env bash
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
FAMILIES=linalg STEPS="build" bash tools/gpu_check.sh 2>&1 | grep -E "step|Error"
timeout 200 python3 scratch/linalg_host.py 2>&1 | grep -v "Warn\|USDT\|profiler" | tee "$OUT/linalg_host.log" | cut -c1-200
