# Session 43 call 6, two GPUs of one host: the review's tests of ops on cuda:1 while the current device is 0
# (device guard, per-device caches, cuda:1's stream and generator), one per family, never run before.
set -u
unset PYTHONDONTWRITEBYTECODE
export JITKERNELS_CACHE=/tmp/jitkernels-cache MAX_JOBS=16 PYTHONUNBUFFERED=1
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
nvidia-smi -L > $OUT/gpus.txt
timeout 120 python3 loader.py build > $OUT/build.log 2>&1; tail -6 $OUT/build.log
timeout 200 python3 -m pytest -v -p no:cacheprovider tests -k second_device 2>&1 | tail -15 | tee $OUT/pytest.log
