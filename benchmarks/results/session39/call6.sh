# Session 39 call 6: the final tree. Every family built (all at once), the new diagonal-answer test and the
# small-route tests on CUDA, and the quickstart on CUDA (every op against its reference).
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
python3 -c "import loader; loader.prebuild()" > $OUT/build.log 2>&1
echo "build: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 120 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 100 tests/test_linalg.py -k "diagonal or small or identity" \
  > $OUT/pytest.log 2>&1; tail -1 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^E " $OUT/pytest.log | head | tee -a $OUT/run.log
s=$(date +%s); timeout 150 python3 examples/quickstart.py --device cuda > $OUT/quickstart_cuda.log 2>&1
echo "quickstart cuda: rc $? in $(( $(date +%s) - s )) s; $(grep -c ' ok ' $OUT/quickstart_cuda.log) ok rows, $(grep -c FAIL $OUT/quickstart_cuda.log) FAIL" | tee -a $OUT/run.log
grep -i "inverse_root" $OUT/quickstart_cuda.log | tee -a $OUT/run.log
echo "done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
