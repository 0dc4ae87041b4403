"""dlopen of one cached library (argv[1]) after import torch and CUDA init; prints ms."""
import sys, time, ctypes
import torch
if torch.cuda.is_available():
    torch.zeros(1, device="cuda")
t = time.perf_counter()
ctypes.CDLL(sys.argv[1])
t1 = time.perf_counter()
boot = open("/proc/sys/kernel/random/boot_id").read()
t2 = time.perf_counter()
with open("/proc/cpuinfo") as f:
    for line in f:
        if line.startswith("flags"):
            break
t3 = time.perf_counter()
print(f"dlopen {1e3*(t1-t):.3f} boot_id {1e3*(t2-t1):.3f} cpuinfo {1e3*(t3-t2):.3f}")
