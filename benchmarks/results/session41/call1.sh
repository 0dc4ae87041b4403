# Session 41 call 1: HEAD (3c1deb6 code): every family built, then the whole GPU suite. Session 40's
# second review (per_sample_grads, matrix_inverse_root under vmap, Shampoo checks, the loader's clean /
# code cache / source re-reads) ran on the CPU only; this is its first GPU run.
set -u
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" OUT=$OUT bash tools/gpu_check.sh
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
