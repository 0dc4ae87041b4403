#!/usr/bin/env bash
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
for r in "" scratch/krootP scratch/krootQ; do python3 -c "import sys; sys.path.insert(0,'.'); import loader; loader.load('linalg', root='$r' or None)" & done; wait
timeout 200 python3 scratch/kron_ab.py 2>&1 | grep -v Warn | tee "$OUT/kron_ab.log"
