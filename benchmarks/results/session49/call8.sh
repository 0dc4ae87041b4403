# Session 49, call 8: the new HMC accept-decision test on the GPU (CUDA at D = 1, 2: the flat stream's accept
# subsequence; D = 3: the step's last call), with test_ebm's other HMC tests.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="ebm" OUT=$OUT timeout 100 bash tools/gpu_check.sh
rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_ebm.py -k "hmc or accept" 2>&1 | tail -4 | tee $OUT/pytest.log
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_ebm.py -k "accept_decisions and cuda" -s 2>&1 | tail -3 | tee -a $OUT/pytest.log
