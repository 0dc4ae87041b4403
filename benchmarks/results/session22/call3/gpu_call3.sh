# Session 22 call 3: edit->reload demo, the whole suite (notebook and loader tests build in the same cache), the demo again.
set -u
export PYTHONUNBUFFERED=1 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
OUT=${OUT:-gpu_out}; mkdir -p $OUT
cat ab/s22/commit.txt > $OUT/commit.txt
ls $JITKERNELS_CACHE/fused | tee $OUT/cache_before.txt
python ab/s22/reload_demo.py 2>&1 | tee $OUT/reload_demo1.log
STEPS="tests" bash tools/gpu_check.sh
python ab/s22/reload_demo.py 2>&1 | tee $OUT/reload_demo2.log
ls $JITKERNELS_CACHE/fused $JITKERNELS_CACHE/ebm | tee $OUT/cache_after.txt
