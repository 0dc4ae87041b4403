# Session 40 call 4: ff3ce40 (the review fixes: every op gains a CompositeExplicitAutograd kernel and the
# drawing ops a tag, so every family changed): every family built, then the whole GPU suite.
set -u
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" OUT=$OUT bash tools/gpu_check.sh
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
