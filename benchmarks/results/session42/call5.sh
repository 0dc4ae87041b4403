# Session 42 call 5: ebm's lane-group kernel with 64-bit D (6f5f523) against the tree before it, on rows it
# takes (D = 100, 33), alternating processes, 3 rounds; then the new 2^31-element row test.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
JITKERNELS_CACHE=/tmp/jkc-head timeout 60 python3 loader.py build ebm 2>&1 | tail -1 | cut -c1-120 >> $OUT/run.log &
JITKERNELS_CACHE=/tmp/jkc-pre JITKERNELS_ROOT=ab/s42/pre_ebm/kernels timeout 60 python3 loader.py build ebm 2>&1 | tail -1 | cut -c1-120 >> $OUT/run.log
wait
for round in 1 2 3; do
  JITKERNELS_CACHE=/tmp/jkc-pre JITKERNELS_ROOT=ab/s42/pre_ebm/kernels timeout 40 python3 ab/s42/local_bench.py pre >> $OUT/bench.jsonl
  JITKERNELS_CACHE=/tmp/jkc-head timeout 40 python3 ab/s42/local_bench.py head >> $OUT/bench.jsonl
done
JITKERNELS_CACHE=/tmp/jkc-head timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_large.py -k ebm_local 2>&1 | tail -2 >> $OUT/run.log
cat $OUT/run.log $OUT/bench.jsonl
