# Session 48, call 7: cem_update's merge without per-range 64-bit divisions (FloorSteps): test_sampling's cem
# tests on the GPU, then the bar row and the serialized kernel times again.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="sampling" OUT=$OUT timeout 60 bash tools/gpu_check.sh
rm -f $OUT/build_*.log
PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache timeout 100 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_sampling.py -k "cem" 2>&1 | tail -4 | tee $OUT/pytest_cem.log
PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache timeout 60 python3 benchmarks/run.py --families sampling --match "cem_update" 2>&1 | grep -v "^\[jitkernels\]" | tail -3 | tee $OUT/bench_sampling.log
