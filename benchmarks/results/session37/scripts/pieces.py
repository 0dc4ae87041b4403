"""Warm load of fused split into small pieces, in the loader's own order, one fresh process per run."""
import sys, time, os, json, hashlib, shutil
import torch
if torch.cuda.is_available():
    torch.zeros(1, device="cuda")
sys.path.insert(0, os.environ.get("JK_REPO", "/work/main"))
T = []
def mark(name):
    T.append((name, time.perf_counter()))
mark("start")
import loader
mark("import loader")
base = loader.kernels_root(None)
name = "fused"
mark("kernels_root")
d = base / name
(d / f"{name}.cpp").is_file()
common = loader._common_dir(base)
mark("paths+is_file")
cuda = loader._cuda_wanted(d)
mark("cuda_wanted")
arch = loader._cuda_arch_list() if cuda else None
mark("arch_list")
fc = loader.cache_dir() / name
mark("cache_dir")
class S: pass
s = S(); s.name=name; s.dir=d; s.common=common; s.family_cache=fc; s.cuda=cuda
s.source_files = lambda: loader._Spec.source_files(s)
digest = loader._Spec._sources_digest(s, False)
mark("sources_digest")
cxx = loader._compiler()
mark("which c++")
idc = loader._file_identity(cxx)
mark("stat c++")
nv = loader._file_identity(shutil.which("nvcc")) if cuda else None
mark("which+stat nvcc")
import importlib.machinery, platform
config = {"torch": torch.__version__, "git": torch.version.git_version, "cuda": torch.version.cuda,
          "abi": torch._C._GLIBCXX_USE_CXX11_ABI,
          "python": [sys.implementation.cache_tag, importlib.machinery.EXTENSION_SUFFIXES[0], platform.machine()]}
mark("config values")
h = hashlib.sha256(digest.encode()); h.update(json.dumps(config, sort_keys=True).encode()); h.hexdigest()
mark("dumps+sha")
spec = loader._Spec(name, base)
mark("whole _Spec again")
spec.cached_build_complete()
mark("manifest")
torch.ops.load_library(str(spec.library))
loader._loaded_namespaces.add(spec.namespace)
mark("dlopen")
fam = loader.Family(name, base)
mark("Family()")
import importlib.util
ops_path = spec.dir / "ops.py"
sp = importlib.util.spec_from_file_location(f"_jk_ops_{spec.namespace}", ops_path)
mod = importlib.util.module_from_spec(sp)
mark("spec+module")
code = sp.loader.get_code(sp.name)
mark("get_code ops.py")
calls = []
real = loader.register_autograd
def timed_register(*a, **k):
    t = time.perf_counter(); real(*a, **k); calls.append(time.perf_counter() - t)
mod.__dict__.update({"NAMESPACE": spec.namespace, "register_autograd": timed_register,
                     "register_vmap": loader.register_vmap, "vjp_by_autograd": loader.vjp_by_autograd,
                     "load_reference": None})
sys.modules[sp.name] = mod
exec(code, mod.__dict__)
mark("exec ops.py")
out = []
for (a, ta), (b, tb) in zip(T, T[1:]):
    out.append(f"{b} {1e3*(tb-ta):.3f}")
out.append(f"register_autograd {1e3*sum(calls):.3f}")
print(" | ".join(out))
