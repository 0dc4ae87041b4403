# Session 33 call 12 (the final tree): the two tensor-core chain tests, after their setup moved into one helper,
# and ebm's other chain tests on the GPU.
set -u
export PYTHONPATH=$PWD JITKERNELS_CACHE=/tmp/jitkernels-cache
echo "tree: $(cat commit.txt)" > $OUT/run.log
python3 loader.py build ebm >> $OUT/run.log 2>&1
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 150 tests/test_ebm.py -k "cuda and (chain or hmc or langevin)" > $OUT/pytest.log 2>&1
echo "pytest rc $?" >> $OUT/run.log; tail -2 $OUT/pytest.log >> $OUT/run.log; grep -E "^FAILED" $OUT/pytest.log | head >> $OUT/run.log
