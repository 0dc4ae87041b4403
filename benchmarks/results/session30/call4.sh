# Session 30 call 4: call 3's suite again with room to finish (call 3 cut it at 380 s, 97% done, no failure
# so far): every family side by side on an empty cache, then the whole GPU suite, verbose.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=$PWD/build/jkcache
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
python3 -c "import loader; loader.prebuild()" > $OUT/build.log 2>&1
echo "build, every family side by side: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 530 python3 -m pytest -v -p no:cacheprovider -n 4 --timeout 300 -m "not large" --durations=25 > $OUT/pytest.log 2>&1
tail -1 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -30 | tee -a $OUT/run.log
echo "dynamic_batch tests: $(grep -c 'dynamic_batch.*PASSED' $OUT/pytest.log) passed, $(grep -c 'dynamic_batch.*FAILED' $OUT/pytest.log) failed" | tee -a $OUT/run.log
grep -A 27 "slowest 25" $OUT/pytest.log > $OUT/durations.log
gzip -f $OUT/pytest.log
echo "suite done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
