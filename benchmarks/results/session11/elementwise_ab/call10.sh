#!/usr/bin/env bash
set -u
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1 MAX_JOBS=16
for r in scratch/kroot scratch/kroot_e scratch/kroot_f; do python3 -c "import sys; sys.path.insert(0,'.'); import loader; loader.load('flatprobe', root='$r')" > /dev/null 2>&1 & done; wait
python3 scratch/ab2.py scratch/kroot compile 2>&1 | grep inputs
for round in 1 2 3; do for r in scratch/kroot scratch/kroot_e scratch/kroot_f; do python3 scratch/ab2.py $r 2>&1 | grep inputs; done; done
