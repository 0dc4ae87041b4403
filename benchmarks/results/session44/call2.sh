# Session 44 call 2: with the compile review's fixes too (ebm's Gaussian Meta kernel, matrix_inverse_root's
# auto route and empty backward, conv1d_gn_mish's empty-batch backward, sampling's data-dependent sizes):
# every family built, the whole GPU suite with room to finish (call 1's was cut at 99%).
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" OUT=$OUT timeout 585 bash tools/gpu_check.sh
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
