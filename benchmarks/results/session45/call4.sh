# Session 45 call 4: after call 3's two failures (per_sample_grads under inference mode gave zeros on torch 2.11),
# the new route; linalg's and autograd's test files, and the loader's (the registration-error wrapper, on a fresh
# machine's first build).
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" PYTEST_ARGS="tests/test_linalg.py tests/test_autograd.py tests/test_loader.py" OUT=$OUT \
  timeout 500 bash tools/gpu_check.sh
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
