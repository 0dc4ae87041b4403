# Session 45 call 5: after the CPU chains' batched draws (ebm_chains_cpu.cpp, philox.h's normal4_of_words_cpu,
# host code only): ebm's, sampling's and the determinism test files (the GPU chains' tests compare with the CPU's).
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" PYTEST_ARGS="tests/test_ebm.py tests/test_sampling.py tests/test_determinism.py" OUT=$OUT \
  timeout 400 bash tools/gpu_check.sh
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
