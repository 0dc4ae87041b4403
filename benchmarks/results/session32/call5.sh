# Session 32 call 5: tools/gpu_check.sh build + bench on the session's kernels (the "Latest run" table),
# then energy16_probe.py. Build logs, cpu_vs_gpu.* and the gpu_check log packed into logs.tgz.
set -u
export PYTHONPATH=$PWD
echo "tree: $(cat commit.txt)" > $OUT/run.log
STEPS="build bench" bash tools/gpu_check.sh > $OUT/gpu_check.log 2>&1; echo "gpu_check exit $?" >> $OUT/run.log
JITKERNELS_CACHE=/tmp/jitkernels-cache timeout 120 python3 benchmarks/results/session32/energy16_probe.py >> $OUT/run.log 2>&1
cd $OUT && tar czf logs.tgz build_*.log cpu_vs_gpu.* gpu_check.log 2>/dev/null && rm -f build_*.log cpu_vs_gpu.* gpu_check.log; ls
