# Warm-load A/B on the GPU host: session 21's loader (ab/s22/base) against this tree's, then load_time.py.
set -u
export JITKERNELS_CACHE=/tmp/jkc PYTHONUNBUFFERED=1
unset PYTHONDONTWRITEBYTECODE
OUT=${OUT:-gpu_out}; mkdir -p $OUT
{
git log --oneline -1 2>/dev/null; cat ab/s22/commit.txt
python loader.py build fused 2>&1 | tail -1
JITKERNELS_ROOT=$PWD/kernels python ab/s22/base/loader.py build fused 2>&1 | tail -1
python -c "import loader; loader.load('fused')"
python ab/s22/cpuinfo_ab.py
for i in 1 2 3 4 5; do python ab/s22/key_parts.py; done
python ab/s22/load_probe.py 25 $PWD/ab/s22/base $PWD
python ab/s22/load_probe.py 25 $PWD/ab/s22/base $PWD
python benchmarks/load_time.py --out $OUT/load_time.json 2>&1 | tail -6
} 2>&1 | tee $OUT/load_ab.log
