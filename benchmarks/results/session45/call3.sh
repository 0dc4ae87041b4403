# Session 45 call 3: the sixth review's fixes and the diffusion changes (generator=, the schedule-order check,
# whose per-row NaN sits in the step coefficients on the GPU): every family built, the whole GPU suite; then the
# diffusion steps' rows (the coefficient kernel changed) and the normal rows.
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" OUT=$OUT timeout 500 bash tools/gpu_check.sh
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
timeout 75 python3 benchmarks/run.py --match "ddpm_step 256" "ddim_step" > $OUT/bench.log 2>&1
grep -v "^\[jitkernels\]" $OUT/bench.log | tail -6
