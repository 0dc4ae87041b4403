"""A first run's build time, two ways, each on an empty cache in a fresh process:

1. side by side: `loader.prebuild()` and then `loader.load` of every family (what quickstart does);
2. in turn: `loader.load` of every family, one after the other (what it did before session 23).

The side-by-side run goes first, so whatever the second run gains from a warm file cache goes to
the old way.

    python benchmarks/first_run.py [--out first_run.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys, time
sys.path.insert(0, {repo!r})
import torch, loader
start = time.perf_counter()
if {side_by_side}:
    loader.prebuild()
ready = {{}}
for name in loader.families():
    loader.load(name)
    ready[name] = round(time.perf_counter() - start, 1)
print("RESULT " + json.dumps({{"total_s": round(time.perf_counter() - start, 1), "ready_s": ready}}))
"""


def first_run(side_by_side: bool) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, JITKERNELS_CACHE=cache)
        code = CHILD.format(repo=str(REPO), side_by_side=side_by_side)
        result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=1200)
        if result.returncode != 0:
            raise RuntimeError(result.stderr[-3000:])
        return json.loads(result.stdout.split("RESULT ")[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="first_run.json")
    args = parser.parse_args()
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    results = {"device": device, "cpus": os.cpu_count(), "torch": torch.__version__, "cuda": torch.version.cuda}
    for label, side_by_side in (("side_by_side", True), ("in_turn", False)):
        start = time.perf_counter()
        results[label] = first_run(side_by_side)
        print(f"{label:13s} every family loaded after {results[label]['total_s']:.1f} s "
              f"(process {time.perf_counter() - start:.1f} s): {results[label]['ready_s']}", flush=True)
    print(f"{device}, {os.cpu_count()} CPUs: first run {results['in_turn']['total_s']:.1f} s in turn, "
          f"{results['side_by_side']['total_s']:.1f} s side by side")
    Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
