# Session 44 call 1: the review's fixes so far (vmap's randomness for unbatched draws, check_numbers, ebm's
# CPU block split, ddim_step's empty-batch check, the benchmark cases' late-bound names): every family built,
# the whole GPU suite; then the benchmark rows the review changed (cem_update at the 6554 elites its row
# names, ddim_step without the timed t - 1).
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" OUT=$OUT timeout 470 bash tools/gpu_check.sh
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
timeout 110 python3 benchmarks/run.py --match "cem_update" "cem_iteration" "ddim_step" > $OUT/bench.log 2>&1
tail -8 $OUT/bench.log
