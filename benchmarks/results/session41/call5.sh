# Session 41 call 5: HEAD (the CLI fix, ebm's extern template, the walkthrough fixes): every family built,
# then the whole GPU suite.
set -u
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" OUT=$OUT bash tools/gpu_check.sh
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
