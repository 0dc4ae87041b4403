# Session 25's verification call: build all (and the A/B variants) at once, A/B, GPU tests, CUDA audit.
set -u
export JITKERNELS_CACHE=$PWD/build/jkcache PYTHONUNBUFFERED=1 MAX_JOBS=16
cp commit.txt $OUT/
t0=$(date +%s)
python3 -c "import loader; loader.prebuild()" > $OUT/build.log 2>&1 &
python3 -c "import loader; loader.prebuild(['diffusion', 'linalg'], root='ab/cur/kernels')" > /dev/null 2>&1 &
python3 -c "import loader; loader.prebuild(['diffusion'], root='ab/old/kernels')" > /dev/null 2>&1 &
python3 -c "import loader; loader.prebuild(['linalg'], root='ab/l_old/kernels')" > /dev/null 2>&1 &
wait
echo "builds: $(( $(date +%s) - t0 )) s"
timeout 120 python3 benchmarks/results/session25/final_ab2.py > $OUT/final_ab2.log 2>&1; tail -11 $OUT/final_ab2.log
echo "ab done: $(( $(date +%s) - t0 )) s"
timeout ${PYTEST_S:-200} python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 190 tests/test_diffusion.py tests/test_linalg.py tests/test_audit.py > $OUT/pytest.log 2>&1; tail -3 $OUT/pytest.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head
echo "pytest done: $(( $(date +%s) - t0 )) s"
timeout ${AUDIT_S:-150} python3 tools/audit_ops.py --device cuda --verbose > $OUT/audit_cuda.log 2>&1; echo "audit rc=$?"; grep -E "^FAIL" $OUT/audit_cuda.log | grep -v known | head -20; tail -3 $OUT/audit_cuda.log
echo "all done: $(( $(date +%s) - t0 )) s"
