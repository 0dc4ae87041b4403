"""Where a warm load of `fused` goes, stage by stage, in one fresh process (after import torch + CUDA init)."""
import sys
import time

import torch

if torch.cuda.is_available():
    torch.zeros(1, device="cuda")
sys.path.insert(0, ".")
stamps = [time.perf_counter()]
import loader  # noqa: E402

stamps.append(time.perf_counter())
base = loader.kernels_root(None)
spec = loader._Spec("fused", base)
stamps.append(time.perf_counter())
assert spec.cached_build_complete()
stamps.append(time.perf_counter())
torch.ops.load_library(str(spec.library))
loader._loaded_namespaces.add(spec.namespace)
stamps.append(time.perf_counter())
family = loader.Family("fused", base)
family._bind(spec)
stamps.append(time.perf_counter())
ms = [1e3 * (b - a) for a, b in zip(stamps, stamps[1:])]
print("import %.2f key %.2f manifest %.2f dlopen %.2f bind %.2f total %.2f ms" % (*ms, sum(ms)))
