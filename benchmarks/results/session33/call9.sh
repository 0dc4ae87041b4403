# Session 33 call 9 (fc1cb84, the final kernels): ebm's, determinism's and autograd's CUDA tests (the new HMC
# test among them), then the table rows of the chains and langevin_step again (bench_rows.py), merged into
# ../nvidia-h200.json on the dev machine.
set -u
export PYTHONPATH=$PWD JITKERNELS_CACHE=/tmp/jitkernels-cache
echo "tree: $(cat commit.txt)" > $OUT/run.log
python3 loader.py build ebm >> $OUT/run.log 2>&1
timeout 240 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 200 tests/test_ebm.py tests/test_determinism.py tests/test_autograd.py -k cuda > $OUT/pytest.log 2>&1
echo "pytest rc $?" >> $OUT/run.log; tail -2 $OUT/pytest.log >> $OUT/run.log; grep -E "^FAILED" $OUT/pytest.log | head >> $OUT/run.log
timeout 200 python3 benchmarks/results/session32/bench_rows.py "ebm langevin_chain" "ebm hmc_chain" "ebm langevin_step" > $OUT/rows.json 2>> $OUT/run.log
echo "bench rc $?" >> $OUT/run.log
python3 -c "import json; d = json.load(open('$OUT/rows.json')); print(d['copy_rate_gbps']); [print(r['op'], r['shape'], r['ours_us'], r.get('eager_us'), r.get('compile_us')) for r in d['rows']]" >> $OUT/run.log
