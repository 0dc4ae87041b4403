import sys, time, importlib.util, os
import torch
sys.path.insert(0, os.environ.get("JK_REPO", "/work/main"))
t0 = time.perf_counter()
spec = importlib.util.find_spec("loader")
t1 = time.perf_counter()
data = spec.loader.get_data(spec.cached)
t2 = time.perf_counter()
import marshal
code = marshal.loads(memoryview(data)[16:])
t3 = time.perf_counter()
mod = importlib.util.module_from_spec(spec)
sys.modules["loader"] = mod
t4 = time.perf_counter()
exec(code, mod.__dict__)
t5 = time.perf_counter()
print(f"find {1e3*(t1-t0):.3f} read {1e3*(t2-t1):.3f} unmarshal {1e3*(t3-t2):.3f} module {1e3*(t4-t3):.3f} exec {1e3*(t5-t4):.3f} total {1e3*(t5-t0):.3f}")
