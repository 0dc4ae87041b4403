# Session 38 call 5: the final linalg (00a6064): every family built, then the suites that reach
# matrix_inverse_root on the GPU (linalg, autograd's and audit's linalg tests, the bad-input sweep,
# determinism, the examples), then linalg's benchmark rows.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
python3 -c "import loader; loader.prebuild()" > $OUT/build.log 2>&1
echo "build: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 330 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 250 tests/test_linalg.py tests/test_bad_input.py \
  tests/test_determinism.py tests/test_examples.py tests/test_audit.py "tests/test_autograd.py" -k "not test_autograd or linalg or inverse_root or kron or per_sample" > $OUT/pytest.log 2>&1
tail -2 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -20 | tee -a $OUT/run.log
grep -E "^E " $OUT/pytest.log | head -20 | tee -a $OUT/run.log; gzip -f $OUT/pytest.log
echo "tests done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 60 python3 benchmarks/run.py --out $OUT/bench --families linalg --match "inverse_root" > $OUT/bench.log 2>&1
grep "matrix_inverse_root" $OUT/bench/*.md | cut -c1-120 | tee -a $OUT/run.log
echo "bench done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
