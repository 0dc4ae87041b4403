# Session 48, call 5: cem_update read 2.99x eager in call 4 (ours 56.5 us, eager 169.0): where its device time
# goes, kernel by kernel (tools/profile_ops.py), and a second reading of the bar row.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build profile" FAMILIES="sampling" PROFILE_CASES="sampling cem_update elite=6554" OUT=$OUT timeout 200 bash tools/gpu_check.sh
rm -f $OUT/build_*.log
timeout 90 python3 benchmarks/run.py --families sampling --match "cem_update" > $OUT/bench_sampling.log 2>&1
grep -v "^\[jitkernels\]" $OUT/bench_sampling.log | tail -4
