# Session 49, call 1: cem_update's selection and elite list in one cluster kernel (n <= 2^18). All families built
# (diffusion_conv.cu's cluster check moved to dependent_launch.cuh); test_sampling and the conv tests of
# test_diffusion; the bar row; cem_update across n; the kernels one at a time.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" OUT=$OUT timeout 100 bash tools/gpu_check.sh
rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_sampling.py tests/test_diffusion.py -k "cem or conv or gn_mish or normal" 2>&1 | tail -15 | tee $OUT/pytest.log
timeout 60 python3 benchmarks/run.py --families sampling --match "cem_update" "cem_iteration" 2>&1 | grep -v "^\[jitkernels\]" | tail -4 | tee $OUT/bench_sampling.log
timeout 90 python3 benchmarks/results/session49/cem_select_sizes.py 2>&1 | tee $OUT/cem_select_sizes.log
CUDA_LAUNCH_BLOCKING=1 timeout 90 python3 tools/profile_ops.py --ours-only "sampling cem_update elite=6554" "sampling cem_iteration" 2>&1 | grep -v "Warning\|jitkernels\|warn_once" | tee $OUT/profile_blocking.log
