# Session 43 call 1: session 42's final tree (4f5e73b): every family built, then the whole GPU suite
# (last whole run: session 41). Covers session 42's kernel changes that no GPU had run (ebm's row-width
# check, the inverse root's kStaticRoom constant).
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" OUT=$OUT bash tools/gpu_check.sh
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
