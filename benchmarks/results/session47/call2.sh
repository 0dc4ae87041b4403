# Session 47 call 2: linalg's CPU routes (kron / per_sample_grad_linear short rows, "auto" by dtype, float32 eigh
# in float64 from n = 384): every family built; test_linalg and test_autocast on the GPU, and the files call 1's
# step limit cut off (test_loader, test_loader_stress, test_portability); then the bar rows: normal float32 and
# bfloat16, cem_update, the D=16 energies, ddpm_step.
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" PYTEST_ARGS="tests/test_linalg.py tests/test_autocast.py tests/test_loader.py tests/test_loader_stress.py tests/test_portability.py" OUT=$OUT timeout 330 bash tools/gpu_check.sh
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
timeout 90 python3 benchmarks/run.py --families sampling --match "normal n=65536 d=5000" "cem_update" > $OUT/bench_sampling.log 2>&1
grep -v "^\[jitkernels\]" $OUT/bench_sampling.log | tail -8
timeout 90 python3 benchmarks/run.py --families ebm diffusion --match "_energy B=2097152" "ddpm_step 256" > $OUT/bench.log 2>&1
grep -v "^\[jitkernels\]" $OUT/bench.log | tail -14
