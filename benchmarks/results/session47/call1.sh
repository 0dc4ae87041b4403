# Session 47 call 1: the CPU chains in vector lanes (ebm_chain_lanes_cpu.cpp, a flat stream), the API
# leftovers (numbers for normal's mean/std, check_numbers everywhere, CEMResult's pytree name, exp_float past 88):
# every family built, the whole GPU suite; then the CPU chains against eager loops on this host's CPU, one thread.
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" OUT=$OUT timeout 465 bash tools/gpu_check.sh
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
timeout 70 python3 ab/s47/chains_cpu.py 1 > $OUT/chains_cpu.log 2>&1; grep -v "^\[jitkernels\]" $OUT/chains_cpu.log
