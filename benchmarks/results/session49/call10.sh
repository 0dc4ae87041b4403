# Session 49, call 10: the final tree's accept-decision test (its eager run now reference.py's hmc_chain) on the
# GPU, with test_ebm's other HMC and flat-stream tests.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="ebm" OUT=$OUT timeout 100 bash tools/gpu_check.sh
rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_ebm.py -k "hmc or accept or flat" 2>&1 | tail -3 | tee $OUT/pytest.log
