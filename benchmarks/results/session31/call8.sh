# Session 31 call 8: after the re-read mend (jk.h's in-place check, diffusion ops.py's step formulas),
# every family built, then the tests those touch, CPU and CUDA.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=$PWD/build/jkcache
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
python3 -c "import loader; loader.prebuild()" > $OUT/build.log 2>&1
echo "build: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 400 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 200 tests/test_autograd.py tests/test_bad_input.py \
  tests/test_diffusion.py tests/test_ebm.py > $OUT/pytest.log 2>&1
tail -1 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -20 | tee -a $OUT/run.log
gzip -f $OUT/pytest.log
