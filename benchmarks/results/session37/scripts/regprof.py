"""register_autograd on this torch, piece by piece (fresh process, fused loaded by hand)."""
import sys, time, os, inspect, cProfile, pstats
import torch
if torch.cuda.is_available():
    torch.zeros(1, device="cuda")
sys.path.insert(0, os.environ.get("JK_REPO", "/work/main"))
import loader
spec = loader._Spec("fused", loader.kernels_root(None))
torch.ops.load_library(str(spec.library))
ns = spec.namespace
q = f"{ns}::relu_add"
T = [time.perf_counter()]
a = torch._C._get_schema(q, "").arguments; T.append(time.perf_counter())
torch._C._get_schema(q + "_autograd", ""); T.append(time.perf_counter())
try:
    torch._C._get_schema(q + "_nonexistent", "")
except RuntimeError:
    pass
T.append(time.perf_counter())
if os.environ.get("PROFILE"):
    pr = cProfile.Profile(time.perf_counter); pr.enable()
lib = torch.library.Library(ns, "FRAGMENT"); T.append(time.perf_counter())
lib.impl("relu_add_autograd", lambda keyset, *args: None, "Autograd", with_keyset=True); T.append(time.perf_counter())
if os.environ.get("PROFILE"):
    pr.disable()
    st = pstats.Stats(pr).stats
    rows = sorted(((ct, tt, nc, f"{fn.split('/')[-1]}:{ln}({name})") for (fn, ln, name), (cc, nc, tt, ct, callers) in st.items()), reverse=True)
    for ct, tt, nc, name in rows[:25]:
        print(f"   {ct*1e6:8.1f} {tt*1e6:8.1f} {nc:4d} {name}")
names = ["get_schema", "get_schema twin", "get_schema missing (raises)", "Library()", "impl"]
print(" | ".join(f"{n} {1e3*(b-a):.3f}" for n, a, b in zip(names, T, T[1:])))
if os.environ.get("SOURCE"):
    print(inspect.getsource(torch.library.Library.__init__))
    print(inspect.getsource(torch.library.Library.impl))
    print(inspect.getsource(torch.library.Library._impl_with_aoti_compile) if hasattr(torch.library.Library, "_impl_with_aoti_compile") else "")
