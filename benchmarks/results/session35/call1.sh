# Session 35 call 1: GPU check of b9bb88d (linalg's one kron launcher): linalg's tests and its large kron test.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONPATH=$PWD
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])" >> $OUT/run.log
t0=$(date +%s)
python3 loader.py build linalg > $OUT/build_linalg.log 2>&1
echo "build linalg: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_linalg.py > $OUT/pytest_linalg.log 2>&1
tail -1 $OUT/pytest_linalg.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest_linalg.log | head | tee -a $OUT/run.log
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_large.py -k kron > $OUT/pytest_large_kron.log 2>&1
tail -1 $OUT/pytest_large_kron.log | tee -a $OUT/run.log
timeout 120 python3 benchmarks/results/session32/bench_rows.py "linalg kron" "linalg per_sample_grad_linear" > $OUT/linalg_rows.json 2> $OUT/linalg_rows.err
python3 -c "
import json, os
for r in json.load(open(os.environ['OUT'] + '/linalg_rows.json'))['rows']:
    print(r['op'], r['shape'], r['dtype'], 'ours', r.get('ours_us'), 'compile', r.get('compile_us'), 'clean', r.get('ours_clean_us'), r.get('compile_clean_us'), 'of_floor', r.get('of_floor'))
" | tee -a $OUT/run.log
echo "done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
