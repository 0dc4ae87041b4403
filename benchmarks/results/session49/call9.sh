# Session 49, call 9: HMC's accept uniforms at D = 1, 2 on CUDA one Philox call per 4 steps (as on the CPU):
# test_ebm's chain tests (the accept-decision test of call 8 included), then the chains at small D.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="ebm" OUT=$OUT timeout 100 bash tools/gpu_check.sh
rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_ebm.py tests/test_determinism.py -k "hmc or accept or flat or chain" 2>&1 | tail -4 | tee $OUT/pytest.log
timeout 120 python3 benchmarks/results/session48/chains_small_d.py 1 2 3 2>&1 | tee $OUT/chains_small_d.log
