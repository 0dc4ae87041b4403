# Session 33 call 4: the Gaussian langevin_chain at D = 16 on the tensor cores (variants ab/s33/vU*T*)
# against the thread-per-row chain kernel (ab/s33/base = 200e46e's kernels).
set -u
export PYTHONPATH=$PWD JITKERNELS_CACHE=/tmp/jitkernels-cache
echo "tree: $(cat commit.txt) + uncommitted ebm_mma.cuh / ebm_langevin.cu" > $OUT/run.log
timeout 500 python3 ab/s33/chain_mma_probe.py vU1T128 vU2T128 vU4T128 vU1T256 >> $OUT/run.log 2>&1
echo "rc $?" >> $OUT/run.log
