# Session 44 call 3: the final code (the message and workflow reviews' fixes too): every family built, the whole
# GPU suite; then cem_update again (call 1 met its >= 3x bar by 4%: a second reading).
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" OUT=$OUT timeout 500 bash tools/gpu_check.sh
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
timeout 80 python3 benchmarks/run.py --match "cem_update" > $OUT/bench.log 2>&1
grep -v "^\[jitkernels\]" $OUT/bench.log | tail -3
