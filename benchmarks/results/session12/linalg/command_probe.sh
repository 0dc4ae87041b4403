#!/usr/bin/env bash
# session 12 call 5: is matrix_inverse_root p=4 n=1024 host-bound? (scratch/linalg_probe.py, tools/profile_ops.py)
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
FAMILIES=linalg STEPS="build" bash tools/gpu_check.sh 2>&1 | grep -E "step|Error"
timeout 240 python3 scratch/linalg_probe.py 2>&1 | grep -v Warn | tee "$OUT/linalg_probe.log"
timeout 120 python3 tools/profile_ops.py "linalg matrix_inverse_root n=1024" "linalg matrix_inverse_root n=256 float32" 2>&1 | head -60 | tee "$OUT/profile.log"
