# Session 27 call 5: tools/gpu_check.sh build + bench on the session's final kernels (the benchmark table),
# build logs and cpu_vs_gpu.* packed into logs.tgz (only 8 files come back).
set -u
echo "tree: $(cat commit.txt)" > $OUT/run.log
STEPS="build bench" bash tools/gpu_check.sh > $OUT/gpu_check.log 2>&1; echo "gpu_check exit $?" >> $OUT/run.log
cd $OUT && tar czf logs.tgz build_*.log cpu_vs_gpu.* gpu_check.log 2>/dev/null && rm -f build_*.log cpu_vs_gpu.* gpu_check.log; ls
