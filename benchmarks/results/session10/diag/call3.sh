#!/usr/bin/env bash
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
STEPS="build" FAMILIES=linalg bash tools/gpu_check.sh > /dev/null 2>&1
CS=compute-sanitizer
EX=(); for w in native gemm xmma cutlass cudnn cublas nchw nhwc sm90_ sm80_ gemv splitKreduce syevd sytrd ormtr stedc magma cusolver; do EX+=(--kernel-name-exclude "kns=$w"); done
{
echo "== kernel names"; python3 scratch/diag.py names 2>&1 | tail -30
echo "== racecheck, torch alone, nvjet excluded too"; timeout 120 $CS --tool racecheck --show-backtrace no "${EX[@]}" --kernel-name-exclude kns=nvjet python3 scratch/diag.py bmm 2>&1 | grep -v "^  File\|^    " | head -12
echo "== racecheck, torch alone, nvjet not excluded"; timeout 120 $CS --tool racecheck --show-backtrace no "${EX[@]}" python3 scratch/diag.py bmm 2>&1 | tail -6
echo "== racecheck, our root, nvjet not excluded"; timeout 120 $CS --tool racecheck --show-backtrace no "${EX[@]}" python3 scratch/diag.py root 2>&1 | tail -6
echo "== racecheck, our root, only kns=linalg"; timeout 120 $CS --tool racecheck --show-backtrace no --kernel-name kns=linalg python3 scratch/diag.py root 2>&1 | tail -6
echo "== initcheck, our root"; timeout 120 $CS --tool initcheck --show-backtrace no python3 scratch/diag.py root 2>&1 | grep -v "^=========     \|^========= *$" | sort | uniq -c | sort -rn | head -8
} 2>&1 | tee "$OUT/diag3.log"
