# Session 48, call 1: "before" numbers for the CUDA chains at small D (the tree before the flat stream).
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="ebm" OUT=$OUT timeout 200 bash tools/gpu_check.sh
rm -f $OUT/build_*.log
PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache timeout 300 python3 benchmarks/results/session48/chains_small_d.py 2>&1 | tee $OUT/chains_small_d_before.log
