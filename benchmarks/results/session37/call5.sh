# Session 37 call 5, the final tree: benchmarks/load_time.py first (a quiet machine), then every family
# built and the tests that run today's loader changes on both devices (autograd and vmap registration:
# test_autograd.py and the family suites; the loader's own tests), under a time limit.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
log=$OUT/run.log
echo "tree: $(cat commit.txt)" > $log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $log
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])" >> $log
t0=$(date +%s)
timeout 300 python3 benchmarks/load_time.py --out $OUT/load_time.json 2>&1 | tail -8 >> $log
echo "load_time done: $(( $(date +%s) - t0 )) s" >> $log
python3 -c "import loader; loader.prebuild()" > $OUT/build.log 2>&1
echo "build done: $(( $(date +%s) - t0 )) s" >> $log
timeout 270 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 200 -m "not large" tests/test_autograd.py \
  tests/test_fused.py tests/test_ebm.py tests/test_sampling.py tests/test_diffusion.py tests/test_linalg.py \
  tests/test_autocast.py > $OUT/pytest.log 2>&1
tail -2 $OUT/pytest.log >> $log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -30 >> $log
gzip -f $OUT/pytest.log
echo "done: $(( $(date +%s) - t0 )) s" >> $log
cat $log
