set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run.log
t0=$(date +%s)
python3 loader.py build fused > $OUT/build.log 2>&1 &
for v in base smemtab smemtab_lb; do JITKERNELS_ROOT=ab/s35/$v/kernels python3 loader.py build diffusion >> $OUT/build.log 2>&1 & done; wait
echo "builds: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 400 python3 ab/s35/ddpm_probe.py base=ab/s35/base/kernels smemtab=ab/s35/smemtab/kernels smemtab_lb=ab/s35/smemtab_lb/kernels 2>&1 | tee -a $OUT/run.log | grep -v Warning
echo "done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
