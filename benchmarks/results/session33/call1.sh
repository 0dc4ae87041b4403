# Session 33 call 1: 16-bit Gaussian energy/score variants (scratch family ab/s33/kernels/e16probe) against ebm's.
set -u
export PYTHONPATH=$PWD JITKERNELS_CACHE=/tmp/jitkernels-cache
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >> $OUT/run.log
timeout 500 python3 ab/s33/e16_probe.py ab/s33/kernels >> $OUT/run.log 2>&1
echo "rc $?" >> $OUT/run.log
