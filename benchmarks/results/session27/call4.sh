# Session 27 call 4: every family built side by side (tools/gpu_check.sh build), then the examples
# (tools/gpu_check.sh examples: the U-Net of examples/diffusion_policy.py four ways, and the others).
set -u
echo "tree: $(cat commit.txt)" > $OUT/run.log
STEPS="build examples" bash tools/gpu_check.sh > /dev/null 2>&1
cd $OUT && tar czf logs.tgz build_*.log 2>/dev/null && rm -f build_*.log; grep -E "step|==|speedup|faster|x eager|ms" examples.log | head -60
