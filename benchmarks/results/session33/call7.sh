# Session 33 call 7: tools/gpu_check.sh build + bench + load on the session's kernels (the "Latest run" table,
# load_time.json), then the one test that failed in call 6 (a torch.compile timeout) again, alone, and the
# new tensor-core chain test. Build logs, cpu_vs_gpu.* and the gpu_check log packed into logs.tgz.
set -u
export PYTHONPATH=$PWD
echo "tree: $(cat commit.txt)" > $OUT/run.log
STEPS="build bench load" bash tools/gpu_check.sh > $OUT/gpu_check.log 2>&1; echo "gpu_check exit $?" >> $OUT/run.log
JITKERNELS_CACHE=/tmp/jitkernels-cache timeout 240 python3 -m pytest -q -p no:cacheprovider -p no:xdist --timeout 200 \
  "tests/test_ebm.py::test_dynamic_batch_compiles_once_and_exports[cuda-langevin_step_]" \
  "tests/test_ebm.py::test_dynamic_batch_compiles_once_and_exports[cuda-langevin_step]" \
  "tests/test_ebm.py::test_dynamic_batch_compiles_once_and_exports[cuda-langevin_chain]" \
  tests/test_ebm.py::test_cuda_gaussian16_chain_on_tensor_cores_matches_thread_per_row 2>&1 | tail -3 >> $OUT/run.log
tail -8 $OUT/gpu_check.log >> $OUT/run.log
cd $OUT && tar czf logs.tgz build_*.log cpu_vs_gpu.* gpu_check.log 2>/dev/null && rm -f build_*.log cpu_vs_gpu.* gpu_check.log; ls
