# Session 33 call 8: the Gaussian hmc_chain at D = 16 on the tensor cores (this tree, uncommitted) against
# the thread-per-row kernel (ab/s33/base = 200e46e's kernels); then ebm's CUDA tests on this tree.
set -u
export PYTHONPATH=$PWD JITKERNELS_CACHE=/tmp/jitkernels-cache
echo "tree: $(cat commit.txt) + uncommitted ebm_hmc.cu / ebm_mma.cuh / ebm_langevin.cu" > $OUT/run.log
timeout 300 python3 ab/s33/hmc_mma_probe.py 2>&1 | grep -v "^\[jitkernels\]\|^ebm  " >> $OUT/run.log
echo "rc $?" >> $OUT/run.log
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_ebm.py tests/test_determinism.py -k cuda > $OUT/pytest.log 2>&1
echo "pytest rc $?" >> $OUT/run.log; tail -2 $OUT/pytest.log >> $OUT/run.log; grep -E "^FAILED" $OUT/pytest.log | head >> $OUT/run.log
