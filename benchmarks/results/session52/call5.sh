# Session 52, call 5: philox_probe.cu (Philox4x32-10 with two 32-bit multiplies a round, as philox.h, against one
# mul.wide.u32), and the SASS multiply instructions of each form.
set -u
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
cd benchmarks/results/session52
nvcc -O3 -arch=sm_90 philox_probe.cu -o /tmp/philox_probe && /tmp/philox_probe | tee $OUT/philox_probe.log
nvcc -O3 -arch=sm_90 -cubin philox_probe.cu -o /tmp/philox_probe.cubin
cuobjdump -sass /tmp/philox_probe.cubin > $OUT/philox_probe.sass 2>&1 || echo "no cuobjdump"
awk '/Function :/{f=$0} /IMAD|LOP3|IADD|MOV/{split($2,a,"."); n[f" "a[1]]++} END{for(k in n) print n[k], k}' $OUT/philox_probe.sass | sort -k2 | tee $OUT/philox_sass_counts.txt
grep -o "IMAD[.A-Z0-9]*" $OUT/philox_probe.sass | sort | uniq -c
