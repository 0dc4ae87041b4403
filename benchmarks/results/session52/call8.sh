# Session 52, call 8: the review fixes on the GPU: every test file they touch (ebm, linalg, diffusion, autograd,
# sampling, bad_input, determinism) under 14 workers, then Ackley's and Rastrigin's rows of the benchmark (the
# Ackley kernel now sums sin^2 and takes expm1: its speed should not change).
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" OUT=$OUT timeout 150 bash tools/gpu_check.sh > /dev/null; grep -l "Error\|Traceback" $OUT/build_*.log; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 380 python3 -m pytest -v -p no:cacheprovider -n 14 --timeout=300 -m "not large" tests/test_ebm.py tests/test_linalg.py tests/test_diffusion.py tests/test_autograd.py tests/test_sampling.py tests/test_bad_input.py tests/test_determinism.py > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -12
timeout 100 python3 benchmarks/run.py --out $OUT --families ebm --match "ackley_energy B=2097152" "ackley_score B=2097152" "rastrigin_energy B=2097152" > $OUT/bench.log 2>&1
grep -E "ackley|rastrigin" $OUT/bench.log | tail -8
gzip -f $OUT/pytest.log
