import sys, time, ast, types, os
import torch
repo = os.environ.get("JK_REPO", "/work/main")
sys.path.insert(0, repo)
src = open(f"{repo}/loader.py").read()
tree = ast.parse(src)
codes = [(node.lineno, compile(ast.Module([node], []), f"{repo}/loader.py", "exec")) for node in tree.body]
mod = types.ModuleType("loader"); mod.__file__ = f"{repo}/loader.py"; sys.modules["loader"] = mod
rows = []
for line, c in codes:
    t = time.perf_counter(); exec(c, mod.__dict__); rows.append((time.perf_counter() - t, line))
tot = sum(r[0] for r in rows)
rows.sort(reverse=True)
print(f"total {tot*1e3:.3f} ms; top: " + ", ".join(f"L{l} {1e3*t:.3f}" for t, l in rows[:10]))
