# Session 31 call 3 (same machine, its cache kept): the whole GPU suite on the final code, then ebm's warm
# load against the session's start again (loader.register_vmap instead of torch.library.register_vmap), and
# the vmap / torch.func timings (call 2's run of vmap_bench.py lacked PYTHONPATH).
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=$PWD/build/jkcache PYTHONPATH=$PWD
unset PYTHONDONTWRITEBYTECODE  # as a user's process: bytecode cached
P=benchmarks/results/session31
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
python3 -c "import loader; loader.prebuild()" > $OUT/build.log 2>&1
timeout 430 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 300 -m "not large" > $OUT/pytest.log 2>&1
tail -2 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -30 | tee -a $OUT/run.log
gzip -f $OUT/pytest.log
echo "suite done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
python3 $P/warm_load_ab.py ebm ab/s31/base . 10 2>&1 | tee -a $OUT/run.log
timeout 100 python3 $P/vmap_bench.py ab/s31/base/kernels 2>&1 | tee $OUT/vmap_bench.log >> $OUT/run.log
echo "all done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
