# Session 31 call 2 (same machine as call 1, its cache kept): the session's start (ab/s31/base, a clean
# export of ab20b1c, carried) built for ebm and fused; warm loads of ebm and fused in fresh processes,
# base and new alternating; the vmap and torch.func timings; load_time.py. First the fix of call 1's
# failures (torch 2.11 has no torch._C._functorch.unwrap_dead_wrappers): test_autograd and test_audit.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=$PWD/build/jkcache
unset PYTHONDONTWRITEBYTECODE  # as a user's process: bytecode cached
P=benchmarks/results/session31
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
python3 -c "import torch; print('torch.func APIs:', torch._functorch.utils.unwrap_dead_wrappers, torch._C._functorch.set_single_level_autograd_function_allowed, torch.autograd.forward_ad._current_level, torch._VF._unpack_dual, torch.autograd.forward_ad._set_fwd_grad_enabled)" 2>&1 | tee -a $OUT/run.log
timeout 240 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 200 tests/test_autograd.py tests/test_audit.py > $OUT/pytest_autograd.log 2>&1
tail -1 $OUT/pytest_autograd.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest_autograd.log | head -30 | tee -a $OUT/run.log
(cd ab/s31/base && python3 -c "import loader; loader.prebuild(['ebm', 'fused'])") > $OUT/build_base.log 2>&1
python3 -c "import loader; loader.prebuild()" >> $OUT/build_base.log 2>&1
echo "builds: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
for f in fused ebm; do python3 $P/warm_load_ab.py $f ab/s31/base . 10; done 2>&1 | tee -a $OUT/run.log
timeout 200 python3 $P/vmap_bench.py ab/s31/base/kernels 2>&1 | tee $OUT/vmap_bench.log >> $OUT/run.log
timeout 300 python3 benchmarks/load_time.py --repeats 7 --out $OUT/load_time.json 2>&1 | tail -8 | tee -a $OUT/run.log
echo "all done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
