# Session 33 call 5: the tensor-core Gaussian chain with its tiles-per-warp rule, blocks of 32, 64 or 128 threads (ab/s33/vT*)
# against the thread-per-row chain kernel (ab/s33/base = 200e46e's kernels).
set -u
export PYTHONPATH=$PWD JITKERNELS_CACHE=/tmp/jitkernels-cache
echo "tree: $(cat commit.txt) + uncommitted ebm_mma.cuh / ebm_langevin.cu" > $OUT/run.log
timeout 500 python3 ab/s33/chain_mma_probe.py vT32 vT64 vT128 >> $OUT/run.log 2>&1
echo "rc $?" >> $OUT/run.log
