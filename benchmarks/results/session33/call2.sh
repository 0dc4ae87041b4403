# Session 33 call 2: ebm's langevin_update kernel in the elementwise launcher's shape, A/B against the
# session's start (ab/s33/base, a clean export of 200e46e's kernels/), then ebm's GPU tests on the new tree.
set -u
export PYTHONPATH=$PWD JITKERNELS_CACHE=/tmp/jitkernels-cache
echo "tree: $(cat commit.txt) + the uncommitted ebm.cu change" > $OUT/run.log
timeout 300 python3 ab/s33/update_ab.py ab/s33/base/kernels >> $OUT/run.log 2>&1
echo "rc $?" >> $OUT/run.log
timeout 240 python3 -m pytest -q -x -n 4 tests/test_ebm.py tests/test_determinism.py -k "cuda or gpu" > $OUT/pytest.log 2>&1
echo "pytest rc $?" >> $OUT/run.log
tail -3 $OUT/pytest.log >> $OUT/run.log
