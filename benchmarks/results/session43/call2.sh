# Session 43 call 2: the review fixes (sampling's ranking of +-inf in cem_minimize, linalg's inverse-root backward,
# Shampoo's state and zero statistics, per_sample_grads' uncalled Linears, ebm's wide CPU rows and messages,
# diffusion's int timesteps under compile and length-0 conv, autocast of the eigh routes): every family built,
# the whole GPU suite; cem_minimize's time per iteration before (477ceb2's argmin) and after (a stable sort);
# the examples.
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" OUT=$OUT timeout 420 bash tools/gpu_check.sh
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
timeout 100 python3 ab/s43/cem_time.py base=ab/s43/base/kernels new=kernels > $OUT/cem_time.log 2>&1; tail -4 $OUT/cem_time.log
STEPS="examples" OUT=$OUT timeout 150 bash tools/gpu_check.sh > /dev/null 2>&1; grep -E "==|x\)|time per|speedup|eager|graph" $OUT/examples.log | head -40
