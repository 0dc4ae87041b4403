# Session 48, call 4: the loader files on the GPU machine (and those call 3's step limit may have cut: the
# loader review, the leak tests; the wide-rows thread-count test without the Gaussian, which failed there),
# then the bar rows (normal float32/bfloat16,
# cem_update, the D=16 energies, ddpm_step) and the chains at D = 1, 2 (benchmarks/run.py's new cases).
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" PYTEST_ARGS="tests/test_loader.py tests/test_loader_stress.py tests/test_portability.py tests/test_loader_review.py tests/test_leaks.py tests/test_ebm.py::test_cpu_wide_rows_energies_and_scores_do_not_depend_on_the_thread_count" OUT=$OUT timeout 330 bash tools/gpu_check.sh
gzip -f $OUT/pytest.log; rm -f $OUT/build_*.log
timeout 90 python3 benchmarks/run.py --families sampling --match "normal n=65536 d=5000" "cem_update" > $OUT/bench_sampling.log 2>&1
grep -v "^\[jitkernels\]" $OUT/bench_sampling.log | tail -8
timeout 100 python3 benchmarks/run.py --families ebm diffusion --match "_energy B=2097152" "ddpm_step 256" "chain double_well" > $OUT/bench.log 2>&1
grep -v "^\[jitkernels\]" $OUT/bench.log | tail -24
