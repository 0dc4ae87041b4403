# Session 31 call 2 (same machine as call 1, its cache kept): the session's start (ab/s31/base, a clean
# export of ab20b1c, carried) built for ebm and fused; warm loads of ebm and fused in fresh processes,
# base and new alternating; the vmap and torch.func timings; load_time.py.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=$PWD/build/jkcache
unset PYTHONDONTWRITEBYTECODE  # as a user's process: bytecode cached
P=benchmarks/results/session31
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
(cd ab/s31/base && python3 -c "import loader; loader.prebuild(['ebm', 'fused'])") > $OUT/build_base.log 2>&1
python3 -c "import loader; loader.prebuild()" >> $OUT/build_base.log 2>&1
echo "builds: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
for f in fused ebm; do python3 $P/warm_load_ab.py $f ab/s31/base . 10; done 2>&1 | tee -a $OUT/run.log
timeout 200 python3 $P/vmap_bench.py ab/s31/base/kernels 2>&1 | tee $OUT/vmap_bench.log >> $OUT/run.log
timeout 300 python3 benchmarks/load_time.py --repeats 7 --out $OUT/load_time.json 2>&1 | tail -8 | tee -a $OUT/run.log
echo "all done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
