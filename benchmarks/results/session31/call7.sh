# Session 31 call 7: after jk.h's last edit (a comment and the in-place forward-mode message), every family
# built, then test_autograd and test_bad_input on the GPU machine.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=$PWD/build/jkcache
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
python3 -c "import loader; loader.prebuild()" > $OUT/build.log 2>&1
echo "build: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 200 tests/test_autograd.py tests/test_bad_input.py > $OUT/pytest.log 2>&1
tail -1 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -20 | tee -a $OUT/run.log
gzip -f $OUT/pytest.log
