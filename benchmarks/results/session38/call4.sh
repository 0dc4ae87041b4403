# Session 38 call 4: the register-tiled one-kernel matrix_inverse_root to n <= 64 (this tree) against
# d5d99e3 (the general route at every n; its kernels in ab/s38/old), then linalg's suite on this tree.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
python3 loader.py build linalg > $OUT/build.log 2>&1 &
JITKERNELS_ROOT=$PWD/ab/s38/old/kernels python3 loader.py build linalg > $OUT/build_old.log 2>&1 &
wait
tail -1 $OUT/build.log $OUT/build_old.log | tee -a $OUT/run.log
echo "build: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
JITKERNELS_ROOT=$PWD/ab/s38/old/kernels timeout 120 python3 ab/s38/ab_small.py old > $OUT/ab_small.log 2>&1
timeout 120 python3 ab/s38/ab_small.py new >> $OUT/ab_small.log 2>&1
cat $OUT/ab_small.log | tee -a $OUT/run.log
echo "ab done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 240 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 200 tests/test_linalg.py > $OUT/pytest.log 2>&1
tail -2 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -20 | tee -a $OUT/run.log
grep -E "^E " $OUT/pytest.log | head -20 | tee -a $OUT/run.log
echo "tests done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
