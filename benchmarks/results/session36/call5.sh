# Session 36 call 5 (same warm H200 host as call 4): #2's load times, benchmarks/load_time.py.
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
echo "tree: $(cat commit.txt)" > $OUT/run.log; t0=$(date +%s)
timeout 420 python3 benchmarks/load_time.py --out $OUT/load_time.json 2>&1 | tail -12 | tee -a $OUT/run.log
echo "done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
