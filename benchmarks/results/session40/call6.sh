# Session 40 call 6 (a fresh host): eb9c86d again, since call 5 ran past 600 s and its benchmark files did
# not come back (more than 8 files): every family built, the warm-load-prints-nothing test (torch 2.11 is
# where the override warning showed), benchmarks/run.py and load_time.py; everything packed into one file.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
R=$OUT/r; mkdir -p $R
echo "tree: $(cat commit.txt)" > $R/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/run.log
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])" >> $R/run.log
t0=$(date +%s)
for f in $(python3 -c "import loader; print(*loader.families())"); do python3 loader.py build $f > $R/build_$f.log 2>&1 & done; wait
cat $R/build_*.log | grep -c Overriding | sed 's/^/override warnings: /' >> $R/run.log
echo "build: $(( $(date +%s) - t0 )) s" >> $R/run.log
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_loader.py -k "prints_nothing or warm" 2>&1 | tail -1 >> $R/run.log
timeout 330 python3 benchmarks/run.py --out $R > $R/bench.log 2>&1
echo "bench: $(( $(date +%s) - t0 )) s" >> $R/run.log
timeout 120 python3 benchmarks/load_time.py --out $R/load_time.json > $R/load_time.log 2>&1
tail -5 $R/load_time.log >> $R/run.log
echo "done: $(( $(date +%s) - t0 )) s" >> $R/run.log
cp $R/run.log $OUT/run.log
tar czf $OUT/call6.tgz -C $R .
rm -rf $R
cat $OUT/run.log
