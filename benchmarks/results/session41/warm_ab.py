"""Warm load of fused from several trees on one host, in alternating fresh processes (import torch and
CUDA init first, as load_time.py's 'ours'): import loader + loader.load("fused"), ms.
    python warm_ab.py label=<tree dir> ... [rounds]     (each tree's fused must be built in its cache)"""
import json, os, statistics, subprocess, sys

PROBE = ("import time, torch; torch.zeros(1, device='cuda') if torch.cuda.is_available() else None; "
         "t = time.perf_counter(); import loader; loader.load('fused'); print(1e3 * (time.perf_counter() - t))")
args = sys.argv[1:]
trees = dict(arg.split("=", 1) for arg in args if "=" in arg)
rounds = int(args[-1]) if args and args[-1].isdigit() else 15
times = {label: [] for label in trees}
for _ in range(rounds):
    for label, tree in trees.items():
        env = dict(os.environ, JITKERNELS_CACHE=f"/tmp/jkc-warm-{label}")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        out = subprocess.run([sys.executable, "-c", PROBE], cwd=tree, env=env, capture_output=True, text=True)
        times[label].append(float(out.stdout.split()[-1]))
for label, v in times.items():
    print(json.dumps({"tree": label, "median_ms": round(statistics.median(v), 3), "min_ms": round(min(v), 3),
                      "runs_ms": [round(x, 2) for x in v]}))
