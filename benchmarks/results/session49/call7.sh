# Session 49, call 7: the baseline for calls 5-6, same script on the shipped select passes (6bae1b5, the
# last-block handoff): cem_update across n, and the bar row twice.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="sampling" OUT=$OUT timeout 100 bash tools/gpu_check.sh
rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 90 python3 benchmarks/results/session49/cem_select_sizes.py 2>&1 | tee $OUT/cem_select_sizes.log
for i in 1 2; do timeout 60 python3 benchmarks/run.py --families sampling --match "cem_update" 2>&1 | grep "cem_"; done | tee $OUT/bench_sampling.log
