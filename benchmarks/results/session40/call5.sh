# Session 40 call 5: eb9c86d (call 4's tree plus the ddpm_schedule registration fix): every family built;
# the loader, diffusion and bad-input suites; then the benchmarks (run.py, cpu_vs_gpu.py), load_time.py and
# the examples, on the final kernels.
set -u
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" OUT=$OUT bash tools/gpu_check.sh > /dev/null 2>&1
grep -c "Overriding" $OUT/run.log | sed 's/^/override warnings in the build log: /' | tee -a $OUT/tree.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 150 tests/test_loader.py tests/test_diffusion.py \
  tests/test_bad_input.py > $OUT/pytest_call5.log 2>&1; tail -1 $OUT/pytest_call5.log | tee -a $OUT/tree.txt
grep -E "^FAILED" $OUT/pytest_call5.log | head | tee -a $OUT/tree.txt
gzip -f $OUT/pytest_call5.log
STEPS="bench load examples" OUT=$OUT bash tools/gpu_check.sh 2>&1 | grep -E "== step|copy rate|warm load|cold build" | tail -12
rm -f $OUT/build_*.log
ls $OUT
