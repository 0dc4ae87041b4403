import re, statistics, sys
rows = {"base": [], "new": []}
for line in open(sys.argv[1]):
    m = re.match(r"(base|new)\s+fused: import ([\d.]+) key ([\d.]+) manifest ([\d.]+) dlopen ([\d.]+) bind ([\d.]+) total ([\d.]+)", line)
    if m:
        rows[m.group(1)].append([float(x) for x in m.groups()[1:]])
for tree, r in rows.items():
    if not r:
        continue
    cols = list(zip(*r))
    print(f"{tree} ({len(r)} runs) medians: import %.2f key %.2f manifest %.2f dlopen %.2f bind %.2f total %.2f ms" % tuple(statistics.median(c) for c in cols),
          "| min total %.2f" % min(cols[-1]))
