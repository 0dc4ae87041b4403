"""dlopen split: before the first static initializer (map + relocate) and after it (initializers)."""
import ctypes, os, sys, time
import torch
if torch.cuda.is_available():
    torch.zeros(1, device="cuda")
path = sys.argv[1]
t = time.perf_counter()
lib = ctypes.CDLL(path)
end = time.perf_counter()
first = ctypes.c_double.in_dll(lib, "jk_probe_first_init").value
print(f"{os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(path))))}/{os.path.basename(path)[:9]}: "
      f"dlopen {1e3*(end-t):.3f} = map+relocate {1e3*(first-t):.3f} + initializers {1e3*(end-first):.3f} ms")
