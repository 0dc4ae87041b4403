# Session 27 call 7 (same H100 host as call 6): ebm alone on empty caches, three trees in turn, twice:
# the session's start (49333a0), before langevin's dtype split (2edb12f), and the tree (final).
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16
echo "tree: $(cat commit.txt)" > $OUT/run.log
nproc >> $OUT/run.log; grep -m1 "model name" /proc/cpuinfo >> $OUT/run.log
for round in 1 2; do
  for tree in ab/t_start ab/t_mid .; do
    cache=/tmp/jk7-$round-$(basename $tree)
    t=$(date +%s%N); (cd $tree && JITKERNELS_CACHE=$cache python3 loader.py build ebm > /dev/null 2>&1)
    echo "round $round, $tree: ebm alone $(( ($(date +%s%N) - t) / 1000000 )) ms; slowest objects: $(for log in $(find $cache -name .ninja_log); do awk 'NR > 1 && $4 ~ /\.o$/ {printf "%s %.1f\n", $4, ($2 - $1) / 1000}' $log; done | sort -k2 -rn | head -3 | tr '\n' ' ')" | tee -a $OUT/run.log
  done
done
