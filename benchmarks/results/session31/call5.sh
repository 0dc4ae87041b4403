# Session 31 call 5 (same machine): vmap(grad(ackley_energy)) profiled on the GPU, ours against the reference.
set -u
export PYTHONUNBUFFERED=1 JITKERNELS_CACHE=$PWD/build/jkcache PYTHONPATH=$PWD
echo "tree: $(cat commit.txt)" > $OUT/run.log
timeout 200 python3 benchmarks/results/session31/vmap_grad_profile.py 2>&1 | tee -a $OUT/run.log
