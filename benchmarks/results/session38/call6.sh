# Session 38 call 6: the small-matrix inverse root as one shared driver (922304a): linalg built, its suite,
# and the small-n timings again (against call 4's kernel, the same code before the refactor).
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
t0=$(date +%s)
python3 loader.py build linalg > $OUT/build.log 2>&1; tail -1 $OUT/build.log | tee -a $OUT/run.log
timeout 170 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 150 tests/test_linalg.py > $OUT/pytest.log 2>&1
tail -1 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR|^E " $OUT/pytest.log | head -20 | tee -a $OUT/run.log
gzip -f $OUT/pytest.log
echo "tests done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 50 python3 ab/s38/ab_small.py shared > $OUT/ab_small.log 2>&1; cat $OUT/ab_small.log | tee -a $OUT/run.log
echo "done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
