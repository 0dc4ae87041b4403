# Session 50, call 4: cem_minimize(cuda_graph=True) with only the refit in the graph (the draws and fn eager):
# test_sampling whole, the pool-reuse mutant and per-iteration times (graph_pool_mutant.py), examples/cem_optimize.py.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="sampling ebm" OUT=$OUT timeout 100 bash tools/gpu_check.sh
rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_sampling.py 2>&1 | tail -15 | tee $OUT/pytest.log
timeout 120 python3 benchmarks/results/session50/graph_pool_mutant.py 2>&1 | tee $OUT/graph_pool_mutant.log
timeout 120 python3 examples/cem_optimize.py --out $OUT 2>&1 | grep -v "iter " | tee $OUT/cem_optimize.log
