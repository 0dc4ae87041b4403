# Session 52, call 9: Ackley's cheaper expm1 (exp's polynomial near 0, expf - 1 beyond): test_ebm's Ackley and energy
# tests, then Ackley's and Rastrigin's rows of the benchmark again (call 8: ackley_energy clean L2 84%).
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="ebm" OUT=$OUT timeout 150 bash tools/gpu_check.sh > /dev/null; grep -l "Error\|Traceback" $OUT/build_*.log; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 14 --timeout=300 -m "not large" tests/test_ebm.py -k "ackley or energy or hmc" > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -8
timeout 150 python3 benchmarks/run.py --out $OUT --families ebm --match "ackley_energy B=2097152" "ackley_score B=2097152" "rastrigin_energy B=2097152" "harmonic_energy B=2097152" > $OUT/bench.log 2>&1
grep -E "ackley|rastrigin|harmonic" $OUT/bench.log | tail -8
