import sys, time
import torch
fam = sys.argv[1]
a = time.perf_counter(); import loader; b = time.perf_counter(); loader.load(fam); c = time.perf_counter()
print(f"{1e3*(b-a):.3f} {1e3*(c-b):.3f}")
