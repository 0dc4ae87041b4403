"""Warm loader.load('fused') in fresh processes: session 22's tree (ab/s23/base) against this one,
each with its own kernels and cache, alternating (medians, ms)."""
import json, os, statistics, subprocess, sys
trees = {"base": os.path.abspath("ab/s23/base"), "now": os.path.abspath(".")}
CHILD = r'''
import sys, time, json
sys.path.insert(0, TREE)
import torch
if torch.cuda.is_available(): torch.zeros(1, device="cuda")
t0 = time.perf_counter()
import loader
t1 = time.perf_counter()
loader.load("fused")
t2 = time.perf_counter()
print("RESULT " + json.dumps({"import_ms": (t1 - t0) * 1e3, "load_ms": (t2 - t1) * 1e3, "total_ms": (t2 - t0) * 1e3}))
'''
def run(name):
    env = dict(os.environ, JITKERNELS_CACHE=f"/tmp/warm-ab-{name}")
    out = subprocess.run([sys.executable, "-c", CHILD.replace("TREE", repr(trees[name]))], env=env, capture_output=True, text=True)
    if out.returncode: raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout.split("RESULT ")[1])
for name in trees: run(name); run(name)  # build, then write bytecode and the sources memo
n = int(sys.argv[1]) if len(sys.argv) > 1 else 25
results = {name: [] for name in trees}
for _ in range(n):
    for name in trees: results[name].append(run(name))
for name, rs in results.items():
    print(name, {k: round(statistics.median(r[k] for r in rs), 3) for k in rs[0]})
