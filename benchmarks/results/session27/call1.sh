# Session 27 call 1: first builds with nvcc's --split-compile/--threads (new) against without (old, the same
# sources as ab/same/kernels), each family's per-object compile times; then a same-process A/B of the kernels.
set -u
export JITKERNELS_CACHE=$PWD/build/jkcache PYTHONUNBUFFERED=1 MAX_JOBS=16
echo "tree: $(cat commit.txt)" > $OUT/run.log
compile_times() {  # ninja's log: end - start (ms) of each object, per family
  for log in $(find "$1" -name .ninja_log | sort); do
    awk -v dir="$(basename $(dirname $(dirname $log)))" 'NR > 1 && $4 ~ /\.o$/ {printf "  %-10s %-28s %6.1f s\n", dir, $4, ($2 - $1) / 1000}' "$log"
  done
}
OLD='import loader, sys; [loader.CUDA_FLAGS.remove(f) for f in loader._PARALLEL_NVCC]; loader.load(sys.argv[1], root="ab/same/kernels")'
{
nproc; nvidia-smi --query-gpu=name --format=csv,noheader
t=$(date +%s.%N); python3 loader.py build ebm > /dev/null 2>&1; echo "new: ebm alone $(echo "$(date +%s.%N) - $t" | bc) s"
t=$(date +%s.%N); JITKERNELS_CACHE=$PWD/build/jkold python3 -c "$OLD" ebm > /dev/null 2>&1; echo "old: ebm alone $(echo "$(date +%s.%N) - $t" | bc) s"
t=$(date +%s.%N); for f in fused diffusion sampling linalg; do python3 loader.py build $f > /dev/null 2>&1 & done; wait
echo "new: the other four side by side $(echo "$(date +%s.%N) - $t" | bc) s"
t=$(date +%s.%N); for f in fused diffusion sampling linalg; do JITKERNELS_CACHE=$PWD/build/jkold python3 -c "$OLD" $f > /dev/null 2>&1 & done; wait
echo "old: the other four side by side $(echo "$(date +%s.%N) - $t" | bc) s"
echo "== new"; compile_times build/jkcache; echo "== old"; compile_times build/jkold
} 2>&1 | tee $OUT/compile_times.log
# the A/B loads old from the main cache: copy the old builds there
cp -r build/jkold/* build/jkcache/ 2>/dev/null
python3 loader.py list 2>&1 | tail -6
timeout 300 python3 ab/split_ab.py 2>&1 | grep -v "^W1" | tee $OUT/split_ab.log | tail -25
