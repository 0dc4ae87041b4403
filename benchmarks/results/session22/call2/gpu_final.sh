# Session 22 final: fresh builds + whole suite (gpu_check build tests), edit->reload demo, load_time.py.
set -u
export PYTHONUNBUFFERED=1 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
OUT=${OUT:-gpu_out}; mkdir -p $OUT
cat ab/s22/commit.txt > $OUT/commit.txt
STEPS="build tests" bash tools/gpu_check.sh
python ab/s22/reload_demo.py 2>&1 | tee $OUT/reload_demo.log
python benchmarks/load_time.py --out $OUT/load_time.json 2>&1 | tail -6 | tee $OUT/load_time.log
tar czf $OUT/logs.tgz -C $OUT $(cd $OUT && ls build_*.log diag.log 2>/dev/null)
rm -f $OUT/build_*.log
ls $OUT
