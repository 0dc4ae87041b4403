# Session 33 call 3: the Gaussian score on the tensor cores with a software pipeline (scratch family
# ab/s33/kernels/e16probe, variant 2) against ebm's kernel.
set -u
export PYTHONPATH=$PWD JITKERNELS_CACHE=/tmp/jitkernels-cache
echo "tree: $(cat commit.txt)" > $OUT/run.log
timeout 400 python3 ab/s33/score_probe.py ab/s33/kernels >> $OUT/run.log 2>&1
echo "rc $?" >> $OUT/run.log
