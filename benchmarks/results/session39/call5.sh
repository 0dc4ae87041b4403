# Session 39 call 5: the diagonal answer written once (linalg.h's breaks_diagonal / diagonal_root, for the
# CPU, both CUDA routes and the small kernel): linalg built, its suite, the linalg cases of the bad-input
# sweep and of autograd's tests; the small kernel over n = 8..64 (both of small_product's load paths);
# memcheck and initcheck over the diagonal tests.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
python3 loader.py build linalg > $OUT/build.log 2>&1; tail -1 $OUT/build.log | tee -a $OUT/run.log
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 120 tests/test_linalg.py > $OUT/pytest.log 2>&1
timeout 100 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 80 tests/test_bad_input.py tests/test_autograd.py \
  tests/test_determinism.py -k "linalg or inverse_root or kron or per_sample" > $OUT/pytest_others.log 2>&1
tail -qn1 $OUT/pytest.log $OUT/pytest_others.log | tee -a $OUT/run.log
grep -hE "^FAILED|^ERROR|^E " $OUT/pytest.log $OUT/pytest_others.log | head -20 | tee -a $OUT/run.log
gzip -f $OUT/pytest.log $OUT/pytest_others.log
echo "tests: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 120 python3 benchmarks/results/session39/scripts/small_sizes.py > $OUT/small_sizes.log 2>&1; tee -a $OUT/run.log < $OUT/small_sizes.log
echo "sizes: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
TOOLS="memcheck initcheck" SANITIZE_TESTS="tests/test_linalg.py" SANITIZE_SHARDS=1 SANITIZE_BALANCE= SANITIZE_TIMEOUT=120 \
  SANITIZE_K="diagonal or identity or singular or empty" OUT=$OUT/san bash tools/sanitize.sh > $OUT/sanitize_stdout.log 2>&1
grep -E "^(memcheck|initcheck):" $OUT/san/sanitize.log | tee -a $OUT/run.log
tar czf $OUT/san_logs.tgz -C $OUT san && rm -rf $OUT/san
echo "done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
