"""A warm load of one family split finer than tools/load_stages.py: the pieces of `import loader`, of the
cache key and of the dlopen, each timed the first time it runs in this fresh process (as in a real load).

    python load_probe.py [FAMILY] [--ctypes]     (--ctypes: dlopen by ctypes.CDLL instead of torch.ops.load_library)
"""
import sys
import time

import torch

if torch.cuda.is_available():
    torch.zeros(1, device="cuda")
family = next((a for a in sys.argv[1:] if not a.startswith("-")), "fused")
marks = []
last = time.perf_counter()


def mark(name):
    global last
    now = time.perf_counter()
    marks.append((name, 1e3 * (now - last)))
    last = now


import importlib.util  # noqa: E402  (already imported by torch)
import os  # noqa: E402

sys.path.insert(0, os.getcwd())
last = time.perf_counter()
spec = importlib.util.find_spec("loader")
mark("import.find")
code = spec.loader.get_code("loader")
mark("import.get_code")
module = importlib.util.module_from_spec(spec)
sys.modules["loader"] = module
exec(code, module.__dict__)
mark("import.exec")
loader = module
with open("/proc/cpuinfo") as f:
    for line in f:
        if line.startswith("flags"):
            break
mark("(again) cpuinfo to flags")
base = loader.kernels_root(None)
mark("key.kernels_root")
cuda = loader._cuda_wanted(base / family)
mark("key.cuda_wanted")
archs = loader._cuda_arch_list() if cuda else None
mark("key.arch_list")
cxx = loader._file_identity(loader._compiler())
mark("key.which_cxx")
nvcc = loader._file_identity(loader.shutil.which("nvcc")) if cuda else None
mark("key.which_nvcc")
s = loader._Spec(family, base)
mark("key.whole _Spec (again)")
complete = s.cached_build_complete()
mark("manifest")
if "--ctypes" in sys.argv:
    import ctypes
    ctypes.CDLL(str(s.library))
    mark("dlopen.ctypes")
else:
    torch.ops.load_library(str(s.library))
    mark("dlopen.load_library")
loader._loaded_namespaces.add(s.namespace)
fam = loader.Family(family, base)
fam._bind(s)
mark("bind")
print(family, " ".join(f"{name} {ms:.3f}" for name, ms in marks),
      f"| total {sum(ms for name, ms in marks if '(again)' not in name):.3f} ms", f"PATH entries {len(os.environ['PATH'].split(':'))}")
