"""benchmarks/run.py's rows for the cases matching PATTERN (with the copy rate measured in the same run), as
JSON to stdout: for re-measuring single rows of a committed table.  python bench_rows.py "FAMILY WORD..."..."""
import importlib
import json
import sys

from benchmarks import run

rate = run.copy_rate_gbps("cuda")
rows = []
for family in sorted({p.split()[0] for p in sys.argv[1:]}):  # a pattern starts with its family
    for case in importlib.import_module(f"benchmarks.cases_{family}").cases("cuda"):
        label = f"{case.family} {case.op} {case.shape} {case.dtype}"
        if any(all(word in label for word in p.split()) for p in sys.argv[1:]):
            rows.append(run.run_case(case, "cuda", rate))
print(json.dumps({"copy_rate_gbps": rate, "rows": rows}, indent=1))
