# Session 32 call 7 (same host as call 5, its build cache kept): the bfloat16 gaussian_score row again, now
# that the case converts mean and precision outside the timed calls.
set -u
export PYTHONPATH=$PWD JITKERNELS_CACHE=/tmp/jitkernels-cache
echo "tree: $(cat commit.txt)" > $OUT/run.log
timeout 150 python3 benchmarks/results/session32/bench_rows.py "ebm gaussian_score bfloat16" > $OUT/rows.json 2>> $OUT/run.log
tail -c 600 $OUT/rows.json >> $OUT/run.log
