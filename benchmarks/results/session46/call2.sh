# Session 46 call 2: call 1's three failures mended (env_flag.h without a torch header, cem_update's NaN old std,
# the compiled Shampoo's per-block choice on the device), the ebm mutation review's tests, and ebm's wide rows
# cut into runs: every family built, the whole GPU suite; then ebm's wide rows again (ab/s46/wide_rows.py) and
# the normal rows of #4's bar.
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" OUT=$OUT timeout 450 bash tools/gpu_check.sh
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
timeout 45 python3 ab/s46/wide_rows.py > $OUT/wide_rows.log 2>&1; tail -40 $OUT/wide_rows.log
timeout 80 python3 benchmarks/run.py --families sampling --match "normal n=65536 d=5000" > $OUT/bench.log 2>&1
grep -v "^\[jitkernels\]" $OUT/bench.log | tail -5
