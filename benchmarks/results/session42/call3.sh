# Session 42 call 3: load_time.py alone (call 2's ran past its 240 s timeout: the three loaders taking
# turns over 15 rounds take longer than the old blocks of 9).
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
/usr/bin/time -f "load_time.py: %e s" timeout 480 python3 benchmarks/load_time.py --out $OUT/load_time.json > $OUT/load_time.log 2>&1
tail -7 $OUT/load_time.log >> $OUT/run.log
cat $OUT/run.log
