"""First read of /proc/cpuinfo in a fresh process: the old way (text lines, 8 KB buffer) vs 1 KB raw reads."""
import os, subprocess, sys, statistics
CHILD = r'''
import os, time
p = time.perf_counter
t = p()
if MODE == "old":
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"): break
else:
    fd = os.open("/proc/cpuinfo", os.O_RDONLY); text = b""
    while True:
        chunk = os.read(fd, 1024); text += chunk
        lines = text.split(b"\n"); whole = lines if not chunk else lines[:-1]
        if any(l.startswith(b"flags") for l in whole) or not chunk: break
    os.close(fd)
print((p() - t) * 1e3)
'''
res = {"old": [], "new": []}
for i in range(25):
    for mode in res:
        out = subprocess.run([sys.executable, "-S", "-c", CHILD.replace("MODE", repr(mode))], capture_output=True, text=True)
        res[mode].append(float(out.stdout))
print({m: round(statistics.median(v), 3) for m, v in res.items()}, "cpus", os.cpu_count())
