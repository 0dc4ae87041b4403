"""Where one warm load goes, stage by stage, in this (fresh) process: import loader, the cache key,
the manifest check, dlopen, running ops.py. After import torch and CUDA init, as a user's load.

    python tools/load_stages.py [FAMILY]      (run it several times: each run is one fresh process)
"""
import sys
import time
from pathlib import Path

import torch

if torch.cuda.is_available():
    torch.zeros(1, device="cuda")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
family_name = sys.argv[1] if len(sys.argv) > 1 else "fused"
stamps = [time.perf_counter()]
import loader  # noqa: E402

stamps.append(time.perf_counter())
base = loader.kernels_root(None)
spec = loader._Spec(family_name, base)
stamps.append(time.perf_counter())
if not spec.cached_build_complete():
    sys.exit(f"{family_name} is not built in {loader.cache_dir()}: run `python loader.py build {family_name}` first")
stamps.append(time.perf_counter())
torch.ops.load_library(str(spec.library))
loader._loaded_namespaces.add(spec.namespace)
stamps.append(time.perf_counter())
loader.Family(family_name, base)._bind(spec)
stamps.append(time.perf_counter())
ms = [1e3 * (b - a) for a, b in zip(stamps, stamps[1:])]
note = " (PYTHONDONTWRITEBYTECODE is set: import compiles loader.py each time)" if sys.dont_write_bytecode else ""
print(f"{family_name}: import %.2f key %.2f manifest %.2f dlopen %.2f bind %.2f total %.2f ms%s" % (*ms, sum(ms), note))
