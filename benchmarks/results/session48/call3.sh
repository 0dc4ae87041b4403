# Session 48, call 3: the final code (chains' flat stream, Ackley/exp_float, wide rows, leak tests, the cached
# code's file name): every family built, the whole GPU suite but the loader files (call 4 runs them).
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" PYTEST_ARGS="tests --ignore=tests/test_loader.py --ignore=tests/test_loader_stress.py --ignore=tests/test_portability.py" OUT=$OUT timeout 470 bash tools/gpu_check.sh
gzip -f $OUT/pytest.log; rm -f $OUT/build_*.log
