# Session 38 call 1: every family built, then the whole GPU suite (but `large`) on the session's tree.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 -c "import torch, sys, numpy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0], 'numpy', numpy.__version__)" >> $OUT/run.log
t0=$(date +%s)
python3 -c "import loader; loader.prebuild()" > $OUT/build.log 2>&1
echo "build: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 500 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 300 -m "not large" --durations=10 > $OUT/pytest.log 2>&1
tail -14 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -30 | tee -a $OUT/run.log
gzip -f $OUT/pytest.log
echo "suite done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
