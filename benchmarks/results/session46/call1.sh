# Session 46 call 1: the seventh review's fixes so far, the CPU's AVX2 Philox, the 16-bit normal's turned angle
# grid, ebm's wide-row sums in double: every family built, the whole GPU suite; then the bar rows of normal
# (float32 and bfloat16), the D=16 energies and ddpm_step, ebm's wide rows (ab/s46/wide_rows.py), and the CPU
# draws on this host's CPU, one thread (ab/s46/cpu_draws.py).
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" OUT=$OUT timeout 460 bash tools/gpu_check.sh
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
timeout 70 python3 benchmarks/run.py --match "normal d=5000" "_energy B=2097152" "ddpm_step 256" > $OUT/bench.log 2>&1
grep -v "^\[jitkernels\]" $OUT/bench.log | tail -14
timeout 60 python3 ab/s46/wide_rows.py > $OUT/wide_rows.log 2>&1; tail -25 $OUT/wide_rows.log
timeout 40 python3 ab/s46/cpu_draws.py 1 > $OUT/cpu_draws.log 2>&1; grep "|" $OUT/cpu_draws.log
