# Session 37 call 2: register_autograd's pieces on torch 2.11 (ab/s37/regprof.py); dlopen of fused's
# CUDA build against its C++-only build; reading /proc/cpuinfo against boot_id.
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONPATH=$PWD JK_REPO=$PWD
unset PYTHONDONTWRITEBYTECODE
log=$OUT/run.log
echo "tree: $(cat commit.txt)" > $log
python3 loader.py build fused 2>&1 | tail -1 >> $log
JITKERNELS_CUDA=0 python3 loader.py build fused 2>&1 | tail -1 >> $log
SOURCE=1 PROFILE=1 python3 ab/s37/regprof.py >> $log 2>&1
for i in 1 2 3 4 5 6; do python3 ab/s37/regprof.py; done >> $log 2>&1
cuda_lib=$(python3 -c "import sys; sys.path.insert(0,'.'); import loader; print(loader._Spec('fused', loader.kernels_root(None)).library)")
cpu_lib=$(JITKERNELS_CUDA=0 python3 -c "import sys; sys.path.insert(0,'.'); import loader; print(loader._Spec('fused', loader.kernels_root(None)).library)")
for i in 1 2 3 4 5 6; do echo "cuda: $(python3 ab/s37/dl.py $cuda_lib)"; echo "cpu:  $(python3 ab/s37/dl.py $cpu_lib)"; done >> $log 2>&1
cat $log
