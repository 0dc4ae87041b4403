#!/usr/bin/env bash
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1 MAX_JOBS=16
for r in scratch/kroot scratch/kroot_d scratch/kroot_e; do python3 -c "import sys; sys.path.insert(0,'.'); import loader; loader.load('flatprobe', root='$r')" > /dev/null 2>&1 & done; wait
python3 scratch/ab_unroll.py scratch/kroot compile 2>&1 | tail -2
for round in 1 2 3; do for r in scratch/kroot scratch/kroot_d scratch/kroot_e; do python3 scratch/ab_unroll.py $r 2>&1 | tail -2; done; done
