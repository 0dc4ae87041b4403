# Session 52, call 1: cem_minimize(cuda_graph=True) undoes what a failed capture leaves behind (the generator in
# capture mode, the pool recording); its cuda_graph tests, then the same test against a mutant without the undo;
# then the write floor of normal's output under do_bench (write_floor.py).
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="sampling" OUT=$OUT timeout 150 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 200 python3 -m pytest -v -p no:cacheprovider -n 4 tests/test_sampling.py -k "cuda_graph or cem_minimize" > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -8
cp kernels/sampling/ops.py /tmp/ops.py.orig
sed -i 's/^                _undo_failed_capture(device.index, pool)$/                pass  # mutant: no undo/' kernels/sampling/ops.py
grep -c "mutant: no undo" kernels/sampling/ops.py
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_sampling.py -k "leaves_the_process_usable" > $OUT/pytest_mutant.log 2>&1
grep -E "^E |passed|failed|Offset|already" $OUT/pytest_mutant.log | head -12
cp /tmp/ops.py.orig kernels/sampling/ops.py
timeout 200 python3 benchmarks/results/session52/write_floor.py > $OUT/write_floor.log 2>&1; cat $OUT/write_floor.log | tail -9
