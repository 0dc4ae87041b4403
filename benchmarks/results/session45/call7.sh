# Session 45 call 7: after the final read's mend (DdpmCoefFn::abar_prev, read by the step coefficients on the
# GPU too): diffusion's test file.
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" FAMILIES="diffusion" PYTEST_ARGS="tests/test_diffusion.py" OUT=$OUT timeout 240 bash tools/gpu_check.sh
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
