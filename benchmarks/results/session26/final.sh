# Session 26's last GPU call: every family built, the benchmark table, load times (tools/gpu_check.sh),
# then the GPU tests of what changed since call 4 (ebm's CPU rows, the loader, the C++17 check).
# Only 8 files come back, so the build logs and cpu_vs_gpu.* travel in logs.tgz.
set -u
echo "tree: $(cat commit.txt)" > $OUT/run.log
STEPS="build bench load" bash tools/gpu_check.sh
timeout ${PYTEST_S:-150} python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 140 tests/test_ebm.py tests/test_loader.py \
  tests/test_cxx17.py > $OUT/pytest.log 2>&1; tail -3 $OUT/pytest.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head
cd $OUT && tar czf logs.tgz build_*.log cpu_vs_gpu.* 2>/dev/null && rm -f build_*.log cpu_vs_gpu.*; ls
