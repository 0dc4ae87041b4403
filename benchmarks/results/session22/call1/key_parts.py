import sys, os, time, json
sys.path.insert(0, os.getcwd())
import torch
if torch.cuda.is_available(): torch.zeros(1, device="cuda")
p = time.perf_counter
t = p(); import loader; T = {"import": p() - t}
base = loader.kernels_root(None)
d = base / "fused"
t = p(); cw = loader._cuda_wanted(d); T["cuda_wanted"] = p() - t
t = p(); al = loader._cuda_arch_list() if cw else None; T["arch_list"] = p() - t
t = p(); cd = loader.cache_dir() / "fused"; T["cache_dir"] = p() - t
t = p(); m = json.loads((cd / "sources.json").read_bytes()); T["memo_read"] = p() - t
t = p(); ok2 = all(loader._stamp(k) == v for k, v in m["stamps"].items()); T["stamps"] = p() - t
t = p(); cx = loader._compiler(); T["which_cxx"] = p() - t
import shutil
t = p(); nv = shutil.which("nvcc"); T["which_nvcc"] = p() - t
t = p(); s = loader._Spec("fused", base); T["spec_after"] = p() - t
print({k: round(v * 1e3, 3) for k, v in T.items()}, ok2)
