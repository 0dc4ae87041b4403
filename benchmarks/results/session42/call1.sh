# Session 42 call 1: fused's cold build, 40 fresh processes of the warm-load stage probe (stages, CPU,
# faults, context switches), then load_time.py (#2) on this host.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
nproc >> $OUT/run.log; lscpu | grep -E "Model name|NUMA|Thread|Socket|MHz" >> $OUT/run.log
python3 -c "import torch; print(torch.__version__, torch.version.cuda)" >> $OUT/run.log
python3 loader.py build fused 2>&1 | tail -2 >> $OUT/run.log
for i in $(seq 40); do python3 ab/s42/stage_probe.py >> $OUT/stages.jsonl 2>>$OUT/stages.err; done
timeout 240 python3 benchmarks/load_time.py --out $OUT/load_time.json > $OUT/load_time.log 2>&1
tail -8 $OUT/load_time.log >> $OUT/run.log
cat $OUT/run.log
