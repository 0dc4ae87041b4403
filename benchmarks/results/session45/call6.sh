# Session 45 call 6: the final code (after call 3 the inference-mode fix, the CPU chains' batched draws and
# philox.h's normal4_of_words_cpu, two test refactors): every test file calls 4-5 did not run.
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" PYTEST_ARGS="tests/test_audit.py tests/test_autocast.py tests/test_bad_input.py tests/test_benchmarks.py
  tests/test_diffusion.py tests/test_distributed.py tests/test_examples.py tests/test_fused.py tests/test_loader_review.py
  tests/test_loader_stress.py tests/test_portability.py tests/test_sanitize_summary.py tests/test_walkthrough.py" \
  OUT=$OUT timeout 380 bash tools/gpu_check.sh
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
