"""Warm loader.load(FAMILY) in fresh processes, two trees alternating (each with its own loader.py and
kernels/, each its own cache): what ops.py's registrations add to a load.

    python warm_load_ab.py FAMILY BASE_TREE NEW_TREE [ROUNDS]      (trees built beforehand)
"""
import statistics
import subprocess
import sys

family, base, new = sys.argv[1:4]
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 8
probe = ("import time, torch; torch.zeros(1, device='cuda') if torch.cuda.is_available() else None; "
         "t = time.perf_counter(); import loader; loader.load(%r); print((time.perf_counter() - t) * 1e3)" % family)
times = {base: [], new: []}
for _ in range(rounds):
    for tree in (base, new):
        out = subprocess.run([sys.executable, "-c", probe], cwd=tree, capture_output=True, text=True, check=True)
        times[tree].append(float(out.stdout.strip().splitlines()[-1]))
for tree, label in ((base, "base"), (new, "new")):
    t = sorted(times[tree])
    print(f"{label} ({tree}): import loader + load({family!r}) median {statistics.median(t):.2f} ms, "
          f"lower quartile {t[len(t) // 4]:.2f} ms, all {[round(v, 2) for v in times[tree]]}")
