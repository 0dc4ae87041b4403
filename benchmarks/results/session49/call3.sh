# Session 49, call 3: cem_update's statistics kernel, rows of loads in flight x blocks per SM (temporary
# switches), each setting checked and timed (stats_rows.py); the eager reference for the ratio.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="sampling" OUT=$OUT timeout 100 bash tools/gpu_check.sh
rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
for bps in 2 3 4; do for rows in 8 12 16; do
  JK_EXP_STATS_ROWS=$rows JK_EXP_STATS_BPS=$bps timeout 60 python3 benchmarks/results/session49/stats_rows.py 2>&1 | grep -v jitkernels
done; done | tee $OUT/stats_rows.log
for i in 1 2; do timeout 60 python3 benchmarks/run.py --families sampling --match "cem_update" 2>&1 | grep "cem_update"; done | tee $OUT/bench_sampling.log
