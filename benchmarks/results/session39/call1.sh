# Session 39 call 1: compute-sanitizer (memcheck, racecheck, initcheck, synccheck) over linalg's
# inverse-root CUDA tests, which session 38's one-kernel small-matrix route (and the shared
# query_device_attribute cache of 5d93502) had not been under.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
python3 loader.py build linalg > $OUT/build.log 2>&1; tail -1 $OUT/build.log | tee -a $OUT/run.log
echo "build: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
SANITIZE_TESTS="tests/test_linalg.py" SANITIZE_K="inverse_root" SANITIZE_SHARDS=2 SANITIZE_BALANCE= \
  SANITIZE_TIMEOUT=480 SANITIZE_TEST_TIMEOUT=240 OUT=$OUT/san bash tools/sanitize.sh > $OUT/sanitize_stdout.log 2>&1
echo "sanitize rc $? after $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
cat $OUT/san/sanitize.log >> $OUT/run.log
grep -h -E "PASSED|FAILED|ERROR" $OUT/san/sanitize_memcheck_*.log | sed 's/ *\[.*//' | sort | uniq -c | head -80 > $OUT/memcheck_tests.txt
tar czf $OUT/san_logs.tgz -C $OUT san && rm -rf $OUT/san
