# Session 33 call 11 (the final tree: the chains' launchers share one rule; device code identical to 705779a's):
# ebm's and determinism's CUDA tests.
set -u
export PYTHONPATH=$PWD JITKERNELS_CACHE=/tmp/jitkernels-cache
echo "tree: $(cat commit.txt)" > $OUT/run.log
python3 loader.py build ebm >> $OUT/run.log 2>&1
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 150 tests/test_ebm.py tests/test_determinism.py -k cuda > $OUT/pytest.log 2>&1
echo "pytest rc $?" >> $OUT/run.log; tail -2 $OUT/pytest.log >> $OUT/run.log; grep -E "^FAILED" $OUT/pytest.log | head >> $OUT/run.log
