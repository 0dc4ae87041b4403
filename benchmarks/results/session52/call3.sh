# Session 52, call 3: the recovery after a failed capture, second form (undo what the Python API allows, keep the
# failed graph alive, move on to a fresh pool): the cuda_graph tests, then the recovery test against two mutants
# (no undo at all; the undo but the shared pool kept); then write_floor.py again with the float32 fill of bf16's bytes.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="sampling" OUT=$OUT timeout 150 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 200 python3 -m pytest -v -p no:cacheprovider -n 4 tests/test_sampling.py -k "cuda_graph or cem_minimize" > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -8
cp kernels/sampling/ops.py /tmp/ops.py.orig
sed -i 's/^                _undo_failed_capture(device.index, graph, pool)$/                pass  # mutant: no undo/' kernels/sampling/ops.py
grep -c "mutant: no undo" kernels/sampling/ops.py
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_sampling.py -k "leaves_the_process_usable" > $OUT/pytest_mutant_no_undo.log 2>&1
grep -E "passed|failed|Offset|already recording" $OUT/pytest_mutant_no_undo.log | cut -c1-200 | head -6
cp /tmp/ops.py.orig kernels/sampling/ops.py
sed -i 's/^                _graph_reuse\[device.index\] = (stream, previous, previous_done, torch.cuda.graph_pool_handle())$/                pass  # mutant: the shared pool kept/' kernels/sampling/ops.py
grep -c "mutant: the shared pool kept" kernels/sampling/ops.py
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_sampling.py -k "leaves_the_process_usable" > $OUT/pytest_mutant_same_pool.log 2>&1
grep -E "passed|failed|Offset|already recording" $OUT/pytest_mutant_same_pool.log | cut -c1-200 | head -6
cp /tmp/ops.py.orig kernels/sampling/ops.py
timeout 200 python3 benchmarks/results/session52/write_floor.py > $OUT/write_floor.log 2>&1; tail -11 $OUT/write_floor.log
