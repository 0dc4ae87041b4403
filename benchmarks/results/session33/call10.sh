# Session 33 call 10: the final tree (the tensor-core chains with the shared WarpTiles prologue, whose SASS was
# rescheduled) against 6fb3a30's kernels (ab/s33/prev) in one process, then ebm's and determinism's CUDA tests.
set -u
export PYTHONPATH=$PWD JITKERNELS_CACHE=/tmp/jitkernels-cache
echo "tree: $(cat commit.txt)" > $OUT/run.log
timeout 300 python3 ab/s33/final_ab.py 2>&1 | grep -v "^\[jitkernels\]\|^ebm  " >> $OUT/run.log
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 150 tests/test_ebm.py tests/test_determinism.py -k cuda > $OUT/pytest.log 2>&1
echo "pytest rc $?" >> $OUT/run.log; tail -2 $OUT/pytest.log >> $OUT/run.log; grep -E "^FAILED" $OUT/pytest.log | head >> $OUT/run.log
