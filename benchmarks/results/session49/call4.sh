# Session 49, call 4: the chains' Philox layout in one place (chain_calls_per_step, ebm::kAcceptSubsequences):
# ebm's chain tests, the statistics review and determinism on the GPU; then the bar rows (normal float32/bfloat16,
# cem_update, the D=16 energies, ddpm_step) and the chains.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="ebm sampling diffusion" OUT=$OUT timeout 100 bash tools/gpu_check.sh
rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 280 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_ebm.py tests/test_stats_review.py tests/test_determinism.py -k "chain or hmc or langevin or determin or seed" 2>&1 | tail -6 | tee $OUT/pytest.log
timeout 80 python3 benchmarks/run.py --families sampling --match "normal n=65536 d=5000" "cem_update" > $OUT/bench_sampling.log 2>&1
grep -v "^\[jitkernels\]" $OUT/bench_sampling.log | tail -8
timeout 100 python3 benchmarks/run.py --families ebm diffusion --match "_energy B=2097152" "ddpm_step 256" "chain double_well" > $OUT/bench.log 2>&1
grep -v "^\[jitkernels\]" $OUT/bench.log | tail -24
