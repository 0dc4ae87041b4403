"""One fresh process: fused's warm load split in stages (as tools/load_stages.py), plus the CPU the process
ran on, page faults and context switches, to find what makes some processes ~1 ms slower than others."""
import json, os, resource, sys, time
import torch
if torch.cuda.is_available():
    torch.zeros(1, device="cuda")
sys.path.insert(0, os.getcwd())
def cpu():
    return int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[36])
def ru():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_minflt, r.ru_majflt, r.ru_nvcsw, r.ru_nivcsw
cpu0, ru0 = cpu(), ru()
stamps = [time.perf_counter()]
import loader
stamps.append(time.perf_counter())
base = loader.kernels_root(None)
spec = loader._Spec("fused", base)
stamps.append(time.perf_counter())
assert spec.cached_build_complete()
stamps.append(time.perf_counter())
torch.ops.load_library(str(spec.library))
loader._loaded_namespaces.add(spec.namespace)
stamps.append(time.perf_counter())
loader.Family("fused", base)._bind(spec)
stamps.append(time.perf_counter())
ms = [round(1e3 * (b - a), 3) for a, b in zip(stamps, stamps[1:])]
ru1 = ru()
print(json.dumps({"import": ms[0], "key": ms[1], "manifest": ms[2], "dlopen": ms[3], "bind": ms[4],
                  "total": round(sum(ms), 3), "cpu_start": cpu0, "cpu_end": cpu(),
                  "minflt": ru1[0] - ru0[0], "majflt": ru1[1] - ru0[1], "vcsw": ru1[2] - ru0[2],
                  "ivcsw": ru1[3] - ru0[3]}))
