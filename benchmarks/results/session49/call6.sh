# Session 49, call 6: as call 5, with a two-level pick (64 coarse bins, then 32 bins: 768 bytes a block instead
# of the 16 kB histogram, which cost at n = 2^20): test_sampling, test_large and test_determinism cem tests, the bar row,
# cem_update across n.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="sampling" OUT=$OUT timeout 100 bash tools/gpu_check.sh
rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_sampling.py tests/test_large.py tests/test_determinism.py -k "cem" 2>&1 | tail -4 | tee $OUT/pytest.log
for i in 1 2; do timeout 60 python3 benchmarks/run.py --families sampling --match "cem_update" "cem_iteration" 2>&1 | grep "cem_"; done | tee $OUT/bench_sampling.log
timeout 90 python3 benchmarks/results/session49/cem_select_sizes.py 2>&1 | tee $OUT/cem_select_sizes.log
