# Session 22 call 5 (final tree): every family built, edit->reload demo on a fresh cache, the whole suite.
set -u
export PYTHONUNBUFFERED=1 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
OUT=${OUT:-gpu_out}; mkdir -p $OUT
cat ab/s22/commit.txt > $OUT/commit.txt
STEPS="build" bash tools/gpu_check.sh
python ab/s22/reload_demo.py 2>&1 | tee $OUT/reload_demo.log
STEPS="tests" bash tools/gpu_check.sh
tar czf $OUT/logs.tgz -C $OUT $(cd $OUT && ls build_*.log 2>/dev/null); rm -f $OUT/build_*.log
