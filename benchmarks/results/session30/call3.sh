# Session 30 call 3: the final kernels (dynamic shapes for every op): every family side by side on an empty
# cache, the whole GPU suite, then benchmarks/load_time.py (#2's warm-load bars) in what time is left.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=$PWD/build/jkcache
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])" >> $OUT/run.log
t0=$(date +%s)
python3 -c "import loader; loader.prebuild()" > $OUT/build.log 2>&1
echo "build, every family side by side: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
cat $OUT/build.log >> $OUT/run.log
timeout 380 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 300 -m "not large" > $OUT/pytest.log 2>&1
tail -2 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -30 | tee -a $OUT/run.log
grep -c "dynamic_batch" $OUT/pytest.log >> $OUT/run.log
gzip -f $OUT/pytest.log
echo "suite done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
unset JITKERNELS_CACHE PYTHONDONTWRITEBYTECODE
timeout $(( 560 - ($(date +%s) - t0) )) python3 benchmarks/load_time.py --out $OUT/load_time.json --repeats 7 > $OUT/load_time.log 2>&1
echo "load_time rc $?" | tee -a $OUT/run.log; tail -8 $OUT/load_time.log | tee -a $OUT/run.log
