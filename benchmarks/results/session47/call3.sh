# Session 47 call 3: ebm built; benchmarks/cpu_vs_gpu.py (#3's CPU-vs-GPU table) with the CPU chains in vector
# lanes (the D = 16 Gaussian chain and the double-well HMC chain take them on the CPU).
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
FAMILIES=ebm STEPS="build" OUT=$OUT timeout 120 bash tools/gpu_check.sh > /dev/null 2>&1
rm -f $OUT/build_*.log
timeout 330 python3 benchmarks/cpu_vs_gpu.py --out $OUT > $OUT/cpu_vs_gpu.md 2>&1; grep -v "^\[jitkernels\]" $OUT/cpu_vs_gpu.md
