# Session 38 call 3: matrix_inverse_root's one-kernel route for n <= 32 (171cc4d) and the shared
# block_reduce: every family built, the linalg, diffusion and sampling suites (the users of reduce.cuh),
# linalg's benchmarks and the quickstart on the GPU.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
python3 -c "import loader; loader.prebuild()" > $OUT/build.log 2>&1
echo "build: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 250 tests/test_linalg.py tests/test_diffusion.py tests/test_sampling.py > $OUT/pytest.log 2>&1
tail -3 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -20 | tee -a $OUT/run.log
grep -B5 -A30 "test_inverse_root_small_matrices_cuda" $OUT/pytest.log | grep -E "^E " | head -20 | tee -a $OUT/run.log
gzip -f $OUT/pytest.log
echo "tests done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 150 python3 benchmarks/run.py --out $OUT/bench --families linalg > $OUT/bench.log 2>&1
grep "matrix_inverse_root" $OUT/bench/*.md | cut -c1-200 | tee -a $OUT/run.log
echo "bench done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 100 python3 examples/quickstart.py --device cuda > $OUT/quickstart_cuda.log 2>&1; echo "quickstart rc $?" | tee -a $OUT/run.log
grep "inverse_root" $OUT/quickstart_cuda.log | tee -a $OUT/run.log
