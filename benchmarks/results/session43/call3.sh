# Session 43 call 3: the final kernels (review fixes, Rastrigin's sin^2 form, the GPU tests for untested paths):
# every family built, then the whole GPU suite (call 2's was cut at 99% by its step timeout).
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" OUT=$OUT timeout 560 bash tools/gpu_check.sh
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
