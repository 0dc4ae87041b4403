"""Phases of a warm loader.load('fused') in fresh processes (medians, ms)."""
import json, os, statistics, subprocess, sys
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHILD = r'''
import sys, time, json
sys.path.insert(0, LOADER_DIR)
import torch
if torch.cuda.is_available(): torch.zeros(1, device="cuda")
p = time.perf_counter
t0 = p()
import loader
t1 = p()
base = loader.kernels_root(KROOT)
spec = loader._Spec("fused", base)
t2 = p()
ok = spec.cached_build_complete()
t3 = p()
torch.ops.load_library(str(spec.library)); loader._loaded_namespaces.add(spec.namespace)
t4 = p()
fam = loader.Family("fused", base); fam._bind(spec)
t5 = p()
print("RESULT " + json.dumps(dict(import_ms=(t1-t0)*1e3, key_ms=(t2-t1)*1e3, manifest_ms=(t3-t2)*1e3, dlopen_ms=(t4-t3)*1e3, bind_ms=(t5-t4)*1e3, total_ms=(t5-t0)*1e3)))
'''.replace("KROOT", repr(REPO + "/kernels"))
n = int(sys.argv[1]) if len(sys.argv) > 1 else 15
dirs = sys.argv[2:] or [REPO]
import collections
runs = collections.defaultdict(list)
for i in range(n + 1):
    for d in dirs:
        out = subprocess.run([sys.executable, "-c", CHILD.replace("LOADER_DIR", repr(d))], capture_output=True, text=True)
        if out.returncode: print(out.stderr[-2000:]); sys.exit(1)
        r = json.loads(out.stdout.split("RESULT ")[1])
        if i: runs[d].append(r)
for d in dirs:
    print(d, {k: round(statistics.median(r[k] for r in runs[d]), 3) for k in runs[d][0]})
sys.exit(0)
runs = []
for i in range(n + 1):
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=dict(os.environ))
    if out.returncode: print(out.stderr[-2000:]); sys.exit(1)
    r = json.loads(out.stdout.split("RESULT ")[1])
    if i: runs.append(r)
print({k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]})
