# Session 48, call 6: cem_update's kernels one at a time (CUDA_LAUNCH_BLOCKING=1: each launch waits for the one
# before, so a span is the kernel's own time, not its wait for the previous one as in call 5's profile), at
# 6554 and 410 elites.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="sampling" OUT=$OUT timeout 100 bash tools/gpu_check.sh
rm -f $OUT/build_*.log
CUDA_LAUNCH_BLOCKING=1 timeout 150 python3 tools/profile_ops.py --ours-only "sampling cem_update elite=6554" "sampling cem_iteration" 2>&1 | grep -v Warning | tee $OUT/profile_blocking.log
