#!/usr/bin/env bash
# Why the GPU image's builds carry libstdc++ inside: which libstdc++ the linker takes, and why.
exec > "$OUT/probe_link.log" 2>&1
set -x
c++ --version | head -1; which c++ g++ ld; ld --version | head -1
env | grep -iE "^(CXX|CC|LDFLAGS|CFLAGS|CXXFLAGS|LIBRARY_PATH|LD_LIBRARY_PATH|CUDA_HOME|CPATH)=" 
ls -la /usr/lib/gcc/x86_64-linux-gnu/*/ | grep -iE "stdc|^/|gcc_s"
readlink -f /usr/lib/gcc/x86_64-linux-gnu/13/libstdc++.so
ls -la /usr/lib/x86_64-linux-gnu/libstdc++* /lib/x86_64-linux-gnu/libstdc++* 2>&1
TL=$(python3 -c "import torch.utils.cpp_extension as c; print(c.TORCH_LIB_PATH)"); CH=$(python3 -c "import torch.utils.cpp_extension as c; print(c.CUDA_HOME)")
echo "TORCH_LIB=$TL CUDA_HOME=$CH"
ls -la $CH/lib64/ | grep -iE "stdc|gcc" ; ls -la $TL | grep -iE "stdc|gcc"; ls $TL
printf '#include <string>\nstd::string f(int x){return std::to_string(x);}\n' > /tmp/t.cpp
c++ -shared -fPIC /tmp/t.cpp -o /tmp/t.so -Wl,--trace 2>&1 | grep -iE "stdc|gcc_s"
c++ -shared -fPIC /tmp/t.cpp -o /tmp/t2.so -L$TL -lc10 -ltorch_cpu -Wl,--trace 2>&1 | grep -iE "stdc|gcc_s"
c++ -shared -fPIC /tmp/t.cpp -o /tmp/t3.so -L$TL -L$CH/lib64 -lc10 -lcudart -Wl,--trace 2>&1 | grep -iE "stdc|gcc_s"
readelf -d /tmp/t.so /tmp/t2.so /tmp/t3.so | grep -E "NEEDED|File"
c++ -v -shared -fPIC /tmp/t.cpp -o /tmp/t4.so 2>&1 | grep -E "collect2|COLLECT_GCC_OPTIONS" | tail -2
c++ -print-search-dirs | tail -1 | tr ':' '\n' | head -20
tar -xzf gpu_out/jkcache.tgz -C /tmp/probecache 2>/dev/null || { mkdir -p /tmp/probecache && tar -xzf gpu_out/jkcache.tgz -C /tmp/probecache; }
for f in fused ebm; do so=$(ls /tmp/probecache/$f/*/*.so)
  for i in 1 2 3; do LD_DEBUG=statistics python3 -c "import torch; torch.zeros(1,device='cuda'); import time; t=time.perf_counter(); torch.ops.load_library('$so'); print('dlopen ms', (time.perf_counter()-t)*1e3)" 2>&1 | tail -12; done
done
