export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
python3 loader.py build fused > /dev/null 2>&1
timeout 120 cuda-gdb -batch -ex run -ex "bt 12" --args python3 -c "import torch, loader; f=loader.fused; f.relu_add(torch.ones(3), torch.ones(4))" > $OUT/gdb.txt 2>&1
grep -v "New Thread\|Thread 0x\|exited" $OUT/gdb.txt | grep -A14 "SIGSEGV" | cut -c1-400
