# Session 32 call 2: the one-launch chains' tile load with every global load issued before the shared
# stores (kernels/ebm/ebm_rows.cuh) against the session's start (ab/s32/base, carried): chain_probe.py
# for each, alternating.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=$PWD/build/jkcache PYTHONPATH=$PWD
P=benchmarks/results/session32
echo "tree: $(cat commit.txt) + ebm_rows.cuh edit" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
python3 -c "import loader; loader.prebuild(['ebm'])" > $OUT/build.log 2>&1 &
python3 -c "import loader; loader.prebuild(['ebm'], root='ab/s32/base/kernels')" > $OUT/build_base.log 2>&1
wait
echo "builds: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
for round in 1 2; do
  echo "== base" | tee -a $OUT/run.log; timeout 200 python3 $P/chain_probe.py ab/s32/base/kernels 2>&1 | tee -a $OUT/run.log
  echo "== new" | tee -a $OUT/run.log; timeout 200 python3 $P/chain_probe.py 2>&1 | tee -a $OUT/run.log
done
echo "all done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
