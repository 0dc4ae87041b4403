# Session 53, call 1: tools/shape_sweep.py over every family (ours vs eager vs torch.compile at small, odd, wide
# and narrow shapes and other dtypes), looking for shapes where ours falls behind.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" OUT=$OUT timeout 170 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
python3 -c "import torch; print(torch.__version__, torch.version.cuda)" >> $OUT/gpu.txt
timeout 400 python3 tools/shape_sweep.py --out $OUT --families fused sampling diffusion linalg ebm --max-seconds 360 > $OUT/sweep.log 2>&1
tail -40 $OUT/sweep.log
