# Session 49, call 5: cem_update's select passes without the last-block handoff (each block of the next kernel
# picks the previous pass's digit itself; no done counters, no fences): test_sampling's cem tests, the bar row,
# cem_update across n.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="sampling" OUT=$OUT timeout 100 bash tools/gpu_check.sh
rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_sampling.py tests/test_large.py tests/test_determinism.py -k "cem" 2>&1 | tail -4 | tee $OUT/pytest.log
for i in 1 2; do timeout 60 python3 benchmarks/run.py --families sampling --match "cem_update" "cem_iteration" 2>&1 | grep "cem_"; done | tee $OUT/bench_sampling.log
timeout 90 python3 benchmarks/results/session49/cem_select_sizes.py 2>&1 | tee $OUT/cem_select_sizes.log
