# Session 50, call 5: the final tree on the GPU: every family built, the whole GPU suite (-n 12, not `large`),
# then the bars' benchmark rows and the new cem_minimize loop rows.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" OUT=$OUT timeout 110 bash tools/gpu_check.sh > /dev/null
grep -h "built\|Error" $OUT/build_*.log | cut -c1-60; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 370 python3 -m pytest -q -p no:cacheprovider -n 12 --timeout=300 -m "not large" > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -12; gzip -f $OUT/pytest.log
timeout 100 python3 benchmarks/run.py --families sampling ebm diffusion --match "cem_minimize" "normal n=65536 d=5000" "cem_update" "_energy B=2097152" "ddpm_step 256" > $OUT/bench.log 2>&1
grep -v "^\[jitkernels\]\|^|" $OUT/bench.log | cut -c1-250 | tail -16
