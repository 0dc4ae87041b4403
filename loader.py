"""jitkernels loader: the only entry point.

    import loader
    f = loader.fused              # builds on first use, loads from the cache afterwards
    f.relu_add(x, y, 0.5)
    loader.reload("fused")        # after editing kernels/fused/*: same `f`, new code

A family is a folder `kernels/<name>/` holding `<name>.cpp` (op schemas, CPU
kernels), optionally `<name>.cu` and more `.cu` files (CUDA kernels), `ops.py` (the Python face) and
`reference.py` (plain PyTorch). Each build is keyed by a sha256 over everything
that changes the binary; a cached build whose library matches the sha256 in its
manifest is loaded with `torch.ops.load_library` alone (no ninja, no subprocess, no
lock); anything else is rebuilt under a per-family file lock by loader_build.py, which only a
cache miss or the CLI imports. Run `python loader.py --help` for the CLI.
"""
from __future__ import annotations

import contextlib
import copyreg
import functools
import hashlib
import importlib.machinery
import json
import marshal
import os
import platform
import re
import shutil
import sys
import threading
import time
import types
from pathlib import Path

import torch

__all__ = ["BuildError", "Family", "families", "load", "load_for", "prebuild", "reload", "cache_dir", "info",
           "register_autograd", "register_vmap", "register_drawing_vmap", "register_batch_dim_vmap",
           "vjp_by_autograd", "check_numbers"]

# Paths are made absolute, not resolved: resolving stats every component (~0.1 ms each time, the warm path
# took three), and nothing here needs symlinks undone.
REPO = Path(os.path.abspath(__file__)).parent
# A relative path in the environment (JITKERNELS_CACHE, JITKERNELS_ROOT) is read against the working directory
# at import: a notebook's os.chdir between two loads must not move the cache or the kernels root.
try:
    IMPORT_DIR = os.getcwd()
except OSError:  # the working directory was deleted: relative variables then fall back to the current one
    IMPORT_DIR = ""
# Bump when the way a build is made changes, so old cache entries are not reused.
RECIPE_VERSION = "3"  # 2: the manifest records the library's sha256; 3: and its size and mtime


def _host_vector_flags(cpuinfo_path: str | None = None) -> list[str]:
    """-mavx2 -mfma -mf16c where this CPU has them (x86 Linux). The C++ half is built on the machine that
    loads it, and the flags are part of the cache key: a cache shared with a CPU without them gets its
    own build. The CPU loops then run 8 floats wide with fused multiply-adds (session 10, 2 cores:
    Rastrigin score 2.6x, Langevin step 1.7x, most ops 1.1-1.9x, none slower beyond noise);
    -march=native (AVX-512 there) made half the row reductions 2x slower.
    Who answers: numpy's CPU features (its own CPUID and OS-support checks at import) where torch has
    imported numpy, as it does whenever numpy is installed; else the flags line of /proc/cpuinfo
    (or of cpuinfo_path), whose reading took 0.07-0.19 ms of a ~2.7 ms warm load on the GPU host
    (session 37). The two agree (test_loader.py checks it on the machine that runs the tests)."""
    wanted = ["-mavx2", "-mfma", "-mf16c"]
    if cpuinfo_path is None:
        if not sys.platform.startswith("linux"):
            return []
        numpy_features = _numpy_cpu_features()
        if numpy_features is not None:
            return wanted if all(numpy_features.get(name) for name in ("AVX2", "FMA3", "F16C")) else []
    try:
        with open(cpuinfo_path or "/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return wanted if {"avx2", "fma", "f16c"} <= set(line.split()) else []
    except OSError:
        pass
    return []


def _numpy_cpu_features() -> dict | None:
    """numpy's map of CPU feature names to whether this CPU (and its OS) has them, if numpy (2.x) is
    already imported; None otherwise (importing it here would cost more than reading /proc/cpuinfo)."""
    core = getattr(sys.modules.get("numpy"), "_core", None)
    features = getattr(getattr(core, "_multiarray_umath", None), "__cpu_features__", None)
    return features if isinstance(features, dict) else None


# The C++ standard is the one torch asks for. -fno-math-errno: sqrt need not set errno (nothing reads
# it), which is what lets the compiler vectorize the CPU loops that take square roots.
# -fno-trapping-math: no floating-point operation traps (nothing here unmasks FP exceptions), so g++
# may compute both sides of a select and vectorize the loops with them (jk::cos_pi_float). -fopenmp:
# at::parallel_for is a header template whose OpenMP pragma compiles into our code, and without it
# every CPU kernel ran on one thread (found in session 8). Only on Linux and where torch itself uses
# OpenMP; compile-only, so the calls bind to the libgomp torch has loaded (one runtime in the process,
# and no libgomp needed at link time). Not on macOS, although its torch uses OpenMP too: Apple's clang
# rejects -fopenmp (it wants -Xclang -fopenmp and an omp.h, which the wheel need not ship), so there the
# CPU loops run on the calling thread (untested: no Mac here).
# Then the host's vector extensions (above). -fvisibility=hidden: a reload loads the new library beside
# the old one, and a static inside a template or inline function (a once-per-device flag) was a unique
# symbol that the new library bound to the old one's copy: after a second diffusion build loaded, its
# conv kernel skipped its own large-cluster setup and failed to launch (session 23). Hidden, each library
# keeps its own; nothing is looked up in our libraries by name (ops register from static initializers).
VISIBILITY_FLAGS = ["-fvisibility=hidden", "-fvisibility-inlines-hidden"]
_OPENMP = ["-fopenmp"] if sys.platform.startswith("linux") and torch._C.has_openmp else []
CXX_FLAGS = ["-O3", "-fno-math-errno", "-fno-trapping-math", *_OPENMP,
             *_host_vector_flags(), *VISIBILITY_FLAGS]
# ptxas --split-compile=0: ptxas compiles a file's kernels on every core instead of one; its machine code
# is the same, function for function (session 27: ebm.cu's, ebm_langevin.cu's and ebm_hmc.cu's SASS
# compared). nvcc's own --split-compile also splits cicc's optimizer, whose partitions made ~10% longer
# code and the HMC chain 11% slower, so it is not used. "--threads 0": the archs of a multi-arch build
# compile at once. Only with CUDA 13 (nvcc's major is torch's, loader_build checks): the toolkit these
# flags were tried with. (-O3 is nvcc's host-code level; device code is optimized regardless.)
_CUDA_MAJOR = int((torch.version.cuda or "0").split(".")[0])
_PARALLEL_NVCC = ["-Xptxas", "--split-compile=0", "--threads", "0"] if _CUDA_MAJOR >= 13 else []
CUDA_FLAGS = ["-O3", "--expt-relaxed-constexpr", *(flag for v in VISIBILITY_FLAGS for flag in ("-Xcompiler", v)),
              *_PARALLEL_NVCC]
# The GPU image's compiler (CXX=/opt/gcc/bin/g++) links libstdc++ statically, and every library then
# exported its ~4000 symbols: each one a lookup through the whole process at dlopen (1.2 ms of a 4 ms
# warm load of fused there, session 14), and exported they can bind half to the process's own
# libstdc++ (likely the number-streaming crash in README's Known issues). --exclude-libs keeps a
# static archive's symbols inside our library; with a shared libstdc++ (the CPU machine) it changes nothing.
LINK_FLAGS = ["-Wl,--exclude-libs,ALL"] if sys.platform.startswith("linux") else []
DEFAULT_CUDA_ARCH = "9.0"  # forced CUDA builds with no GPU and no TORCH_CUDA_ARCH_LIST
MANIFEST = "manifest.json"
SOURCES_MEMO = "sources.json"  # <cache>/<family>/: the digest of the sources and their stamps
OPS_CODE = "ops_code.marshal"  # <cache>/<family>/<key>/: ops.py compiled (marshal), see _exec_module

_process_lock = threading.RLock()
_families: dict[str, "Family"] = {}
_loaded_namespaces: set[str] = set()  # op namespaces whose library is in this process


class BuildError(RuntimeError):
    """A family failed to build; the message starts with the first compiler error. `in_sources`: the
    compiler rejected the family's code (not a missing tool or a full disk), so the same sources and
    flags fail the same way again."""

    def __init__(self, message: str, in_sources: bool = False):
        super().__init__(message)
        self.in_sources = in_sources


# Cache key -> the message of its build's compiler error, in this process: a load of sources that failed
# and were not edited since raises that at once instead of compiling them again (a test suite or a
# notebook would wait on the same error at every load). An edit changes the key; reload() retries anyway.
_failed_keys: dict[str, str] = {}


# ---------------------------------------------------------------- configuration

def _env_flag(name: str) -> bool | None:
    value = os.environ.get(name, "").strip().lower()
    if value in ("", "auto"):
        return None
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name} must be 0 or 1, got {os.environ[name]!r}")


def kernels_root(root: str | os.PathLike | None = None) -> Path:
    """The folder holding the families: the argument, $JITKERNELS_ROOT, or the repo's kernels/."""
    if root:
        return Path(os.path.abspath(root))
    return Path(_env_path("JITKERNELS_ROOT") or REPO / "kernels")


def cache_dir() -> Path:
    """$JITKERNELS_CACHE, else ~/.cache/jitkernels (or $XDG_CACHE_HOME/jitkernels)."""
    explicit = _env_path("JITKERNELS_CACHE")
    if explicit:
        return Path(explicit)
    base = _env_path("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(os.path.abspath(os.path.join(base, "jitkernels")))


def _env_path(name: str) -> str | None:
    """The environment variable `name` as an absolute path (None when unset or empty); see IMPORT_DIR."""
    value = os.environ.get(name)
    return os.path.abspath(os.path.join(IMPORT_DIR, os.path.expanduser(value))) if value else None


def families(root: str | os.PathLike | None = None) -> list[str]:
    """Sorted names of the families under the kernels root."""
    base = kernels_root(root)
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if (p / f"{p.name}.cpp").is_file())


def _common_dir(root: Path) -> Path:
    return root / "common" if (root / "common").is_dir() else REPO / "kernels" / "common"


def _cuda_half_on() -> bool:
    """Whether builds here have a CUDA half: JITKERNELS_CUDA, else whether a GPU is usable."""
    forced = _env_flag("JITKERNELS_CUDA")
    if forced is not None:
        return forced
    return torch.version.cuda is not None and torch.cuda.is_available()


def _cuda_wanted(family_dir: Path) -> bool:
    """Whether to build this family's CUDA half: it has one, and builds here have one (_cuda_half_on)."""
    return (family_dir / f"{family_dir.name}.cu").is_file() and _cuda_half_on()


def _cuda_arch_list() -> str:
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    if torch.cuda.is_available():
        caps = {torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())}
        return ";".join(f"{major}.{minor}" for major, minor in sorted(caps))
    return DEFAULT_CUDA_ARCH


def _file_identity(path: str | None) -> list:
    """Path, size and mtime of a tool (of the file its links end at): changes when the tool is upgraded
    or its links are pointed elsewhere, costs one stat."""
    if not path:
        return [None]
    stat = os.stat(path)
    return [path, stat.st_size, stat.st_mtime_ns]


def _nvcc_identity() -> list:
    """The first nvcc on PATH (path, size, mtime), and $CUDA_HOME and $CUDA_PATH, which a build takes its
    toolkit from before PATH's (loader_build._cuda_home): pointing CUDA_HOME at another toolkit used to
    leave the key as it was, and a load kept the build of the old one."""
    return [*_file_identity(shutil.which("nvcc")), os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CXX", "c++"))


# ---------------------------------------------------------------- the build spec

class _Spec:
    """Everything that decides one family's binary, and the cache key over it."""

    def __init__(self, name: str, root: Path, cuda: bool | None = None, reread_sources: bool = False):
        self.name = name
        self.root = root
        self.dir = root / name
        if not (self.dir / f"{name}.cpp").is_file():
            if not root.is_dir():  # a mistyped root argument or JITKERNELS_ROOT: say so, not "families: none"
                raise ValueError(f"no kernel family {name!r}: the kernels root {root} is not a folder "
                                 "(the root argument, else JITKERNELS_ROOT)")
            known = ", ".join(families(root)) or "none"
            raise ValueError(f"no kernel family {name!r} under {root} (families: {known})")
        self.common = _common_dir(root)
        self.cuda = _cuda_wanted(self.dir) if cuda is None else cuda and (self.dir / f"{name}.cu").is_file()
        self.arch_list = _cuda_arch_list() if self.cuda else None
        self.family_cache = cache_dir() / name
        self.key = self._key(reread_sources)
        self.namespace = f"jk_{name}_{self.key[:12]}"
        self.out_dir = self.family_cache / self.key
        self.library = self.out_dir / _library_file(self.namespace)

    def _key(self, reread_sources: bool = False) -> str:
        h = hashlib.sha256(self._sources_digest(reread_sources).encode())
        config = {
            "recipe": RECIPE_VERSION,
            "family": self.name,
            "cxx_flags": CXX_FLAGS, "cuda_flags": CUDA_FLAGS if self.cuda else None, "link_flags": LINK_FLAGS,
            "torch": torch.__version__, "torch_git": torch.version.git_version,
            "torch_cuda": torch.version.cuda, "cxx11_abi": torch._C._GLIBCXX_USE_CXX11_ABI,
            "cxx": _file_identity(_compiler()),
            "nvcc": _nvcc_identity() if self.cuda else None,
            "archs": self.arch_list,
            "python": [sys.implementation.cache_tag, importlib.machinery.EXTENSION_SUFFIXES[0], platform.machine()],
        }
        self.config = json.dumps(config, sort_keys=True)  # what a build's reused objects must match
        h.update(self.config.encode())
        return h.hexdigest()

    def _sources_digest(self, reread: bool) -> str:
        """sha256 over the names and contents of the family's files (but reference.py) and kernels/common/.
        Listing and reading them took ~0.4 ms of a ~2.5 ms warm load, so the digest is kept in the cache
        with a stamp (size, mtime, ctime, inode) of every file and folder it read, and stands while each
        stamp still matches: one stat each (adding, removing or renaming a file changes its folder's
        stamp). Stamps are recorded only once they are 2 s old, so an edit in the same timestamp tick as
        the recording cannot go unseen; with `reread` (reload does) the files are always read."""
        memo_path = self.family_cache / SOURCES_MEMO
        if not reread:
            try:
                memo = json.loads(memo_path.read_bytes())
                if memo["folders"] == [str(self.dir), str(self.common)] and all(
                        _stamp(path) == stamp for path, stamp in memo["stamps"].items()):
                    return memo["digest"]
            except (OSError, ValueError, KeyError, AttributeError, TypeError):  # TypeError: JSON not an object
                pass
        folders, files = self.source_files()
        stamps = {path: _stamp(path) for path in folders + files}  # before reading: a later edit shows
        h = hashlib.sha256()
        for path in files:
            folder, name = os.path.split(path)
            h.update(f"{os.path.basename(folder)}/{name}".encode() + b"\0")
            with open(path, "rb") as source:
                h.update(source.read() + b"\0")
        digest = h.hexdigest()
        if max(ctime for _, _, ctime, _ in stamps.values()) < time.time_ns() - 2_000_000_000:
            _write_json_atomically(memo_path, {"folders": [str(self.dir), str(self.common)], "stamps": stamps,
                                               "digest": digest})
        return digest

    def source_files(self) -> tuple[list[str], list[str]]:
        """The folders listed and the files hashed: the family's (but reference.py) and kernels/common/'s.
        Strings, not Paths: pathlib is slow on Python 3.12 (warm path)."""
        folders: list[str] = []
        files = ([p for p in _files_under(str(self.dir), folders) if os.path.basename(p) != "reference.py"]
                 + _files_under(str(self.common), folders))
        return folders, files

    def sources(self) -> list[Path]:
        """What the build compiles: <name>.cpp and any other .cpp file of the family folder, and with
        CUDA <name>.cu and any other .cu file (a family may split its code over several files, which
        ninja compiles at once: ebm's chains, sessions 20 and 27). Only a build asks: the cache key
        hashes the whole folder."""
        def family_files(suffix: str) -> list[Path]:
            main = self.dir / f"{self.name}{suffix}"
            return [main] + sorted(p for p in self.dir.glob(f"*{suffix}") if p != main)

        return family_files(".cpp") + (family_files(".cu") if self.cuda else [])

    def halves(self) -> str:
        return f"C++ + CUDA sm_{self.arch_list.replace('.', '')}" if self.cuda else "C++"

    def cached_build_complete(self) -> bool:
        """True when the published library is there and unaltered (sha256 as recorded).

        The hash, not just the size, so a library damaged in place (same size, other bytes)
        is rebuilt instead of loaded. Hashing costs a few ms for a 10 MB library, so the warm
        path hashes only when the file's size or mtime differ from the manifest's record:
        any write into the file changes its mtime."""
        try:
            manifest = json.loads((self.out_dir / MANIFEST).read_text())
            stat = _stat_identity(self.library)
            if stat == manifest["library_stat"]:
                return True
            if _sha256(self.library) != manifest["library_sha256"]:
                return False
        except (OSError, ValueError, KeyError, TypeError):  # TypeError: a manifest that is not an object
            return False
        # Intact, but copied or restored (tar keeps mtimes to the second): record the new stat, or
        # every warm load would hash the library again (2.4 ms for fused's, session 15).
        _write_json_atomically(self.out_dir / MANIFEST, manifest | {"library_stat": stat})
        return True


def _write_json_atomically(path: Path, value) -> None:
    """Replace the JSON file at path in one step (readers see the old or the new one, never a torn file).
    Best effort: in a read-only cache the file stays as it was."""
    _write_bytes_atomically(path, json.dumps(value, indent=1).encode())


def _write_bytes_atomically(path: Path, data: bytes) -> None:
    """_write_json_atomically's step for any bytes."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_bytes(data)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):  # e.g. no folder to hold it (a file is where one should be)
            temporary.unlink()


def _stat_identity(path: Path) -> list[int]:
    info = path.stat()
    return [info.st_size, info.st_mtime_ns]


def _stamp(path: str) -> list[int]:
    """What changes when a file or folder is written, replaced or renamed into (the sources memo)."""
    info = os.stat(path)
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino]


def _files_under(folder: str, folders: list[str], seen: set | None = None) -> list[str]:
    """Regular files below folder, sorted, skipping __pycache__; the folders listed are appended to
    `folders`. os.scandir knows each entry's type without a stat call. A symlinked folder is followed
    (its files were left out of the key, so their edits went unseen: session 40's review), once."""
    seen = set() if seen is None else seen
    seen.add(os.path.realpath(folder))
    found = []
    folders.append(folder)
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir():
                if entry.name != "__pycache__" and (not entry.is_symlink() or os.path.realpath(entry.path) not in seen):
                    found += _files_under(entry.path, folders, seen)
            elif entry.is_file():
                found.append(entry.path)
    return sorted(found)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _load_cached(spec: _Spec) -> bool:
    """Load the published build if it is whole; False when it has to be built."""
    if not spec.cached_build_complete():
        return False
    try:
        torch.ops.load_library(str(spec.library))
    except OSError as exc:  # whole but unloadable: rebuilding is the one thing that can help
        print(f"[jitkernels] the cached build at {spec.library} does not load ({exc}); rebuilding it",
              file=sys.stderr, flush=True)
        return False
    _loaded_namespaces.add(spec.namespace)
    return True


def _load_library(spec: _Spec) -> None:
    """Load the family's library, building it first if the cache lacks a whole copy."""
    if spec.namespace in _loaded_namespaces:
        return
    if _load_cached(spec):  # warm path: no lock, no subprocess, no build code imported
        return
    if spec.key in _failed_keys:
        raise BuildError(f"{_failed_keys[spec.key]}\n(not compiled again: nothing changed since; edit the "
                         f"sources, or call loader.reload({spec.name!r}) to try again as they are)", in_sources=True)
    import loader_build  # the cold path: toolchain checks, the family lock, compilers, publishing

    try:
        loader_build.build_and_load(spec)
    except BuildError as exc:
        if exc.in_sources:
            _failed_keys[spec.key] = str(exc)
        raise


# ---------------------------------------------------------------- binding

_libraries: dict = {}  # namespace -> the library our Python kernels register through, kept alive: a freed one unregisters


def register_autograd(qualname: str, backward, *, setup_context, forward_formula=None) -> None:
    """torch.library.register_autograd for our ops (positional arguments only), at a fraction of its
    load time. torch's builds a dataclass per op (~0.45 ms on a fresh process's first call: a fifth of
    a warm load of `fused`; ebm registers seven); this registers the same Autograd kernel without it.
    As in torch's: the forward re-dispatches below autograd with the keyset the dispatcher passed,
    setup_context sees every input with its default filled in, and backward sees needs_input_grad for
    the op's inputs only. ops.py files get it from the loader, beside NAMESPACE.
    Looking up the op and making its autograd.Function wait for the op's first call, so a family's unused
    ops never pay for them: a warm load of fused on the GPU machine went 3.70 -> 3.17 ms (session 20,
    same host, alternating fresh processes: benchmarks/results/session20/call5).
    An op defined with jk::def_differentiable (jk.h) has a twin `<name>_autograd`: the kernel goes there,
    and the op's own C++ Autograd kernel sends only the calls that record a gradient to it.
    forward_formula(value, *args): the op's derivatives for forward mode (see _forward_mode); without it
    forward mode raises."""
    arguments = _schema(qualname, "register_autograd").arguments
    if any(argument.kwarg_only for argument in arguments):
        raise NotImplementedError(f"{qualname} has keyword-only arguments: use torch.library.register_autograd")
    namespace, name = qualname.split("::")
    try:  # defined with jk::def_differentiable: the Python kernel serves its twin, plain calls stay in C++
        torch._C._get_schema(f"{qualname}_autograd", "")
        kernel_op = f"{name}_autograd"
    except RuntimeError:  # defined with m.def: the Python kernel serves every call
        kernel_op = name

    @functools.cache
    def op_and_function():
        op = getattr(getattr(torch.ops, namespace), kernel_op).default

        def forward(*inputs):
            *args, keyset = inputs  # the keyset rides last, so backward returns None for it
            if not torch._C._are_functorch_transforms_active():
                return _below_autograd(op, keyset, args)
            # apply turned gradients off, for every level: the levels below this one record theirs
            with torch.enable_grad(), torch.autograd.forward_ad._set_fwd_grad_enabled(True):
                return _below_autograd(op, keyset, args)

        def setup_context_without_keyset(ctx, inputs, output):
            setup_context(ctx=ctx, inputs=inputs[:-1], output=output)

        def backward_without_keyset(ctx, *grads):
            needs_input_grad = ctx.needs_input_grad
            ctx.needs_input_grad = needs_input_grad[:-1]
            try:
                grads_in = backward(ctx, *grads)
            finally:
                ctx.needs_input_grad = needs_input_grad
            return (*grads_in, None) if isinstance(grads_in, tuple) else (grads_in, None)

        # A single-level Function (see _apply_function): forward and setup_context apart, applied by torch's
        # C++ apply. Compiled autograd asks the node's class for autograd.Function's key, which
        # _SingleLevelFunction lacks (every op's backward raised AttributeError there; session 53's review).
        function = type(f"{name}_backward", (torch.autograd.function._SingleLevelFunction,),
                        {"forward": staticmethod(forward), "setup_context": staticmethod(setup_context_without_keyset),
                         "backward": staticmethod(backward_without_keyset),
                         "_compiled_autograd_key": vars(torch.autograd.Function)["_compiled_autograd_key"]})
        return op, function

    def autograd_kernel(keyset, *args):
        if len(args) < len(arguments):  # the dispatcher drops trailing arguments equal to their defaults
            args += tuple(argument.default_value for argument in arguments[len(args):])
        op, function = op_and_function()
        needs_grad = torch.is_grad_enabled() and torch._C._any_requires_grad(*args)
        # Without a gradient to record, route_autograd sent the call here for a tangent. With one, a tangent
        # needs a dual level (torch.func.jvp enters one too): the per-tensor look (~3 µs a tensor, a third
        # of a reverse-mode call of relu_add) waits for one.
        if not needs_grad or torch.autograd.forward_ad._current_level >= 0:
            tangent_at = _forward_tangent_at(args)
            if tangent_at is not None:
                return _forward_mode(name, arguments[tangent_at].name, op, keyset, args, forward_formula)
        if needs_grad:
            return _apply_function(function, *args, keyset)
        return _below_autograd(op, keyset, args)

    _library(namespace).impl(kernel_op, "Autograd", autograd_kernel, True)  # True: with the keyset


def _schema(qualname: str, caller: str):
    """qualname's schema, or an error naming the op and the ops the build does define: torch's own said
    "Found no matching schema", and register_vmap (whose op lookup waits for the first vmap) registered its
    rule on no op at all, in silence, as for an op renamed in C++ but not in ops.py."""
    try:
        return torch._C._get_schema(qualname, "")
    except RuntimeError:
        namespace = qualname.split("::")[0]
        defined = sorted({op.split("::")[1].split(".")[0] for op in torch._C._dispatch_get_all_op_names()
                          if op.startswith(f"{namespace}::") and not op.endswith("_autograd")})
        raise RuntimeError(f"{caller}: there is no op {qualname}; the family's C++ defines "
                           f"{', '.join(defined) or 'none'}") from None


def _library(namespace: str):
    """The dispatcher library that our Python kernels of a build's namespace are registered through: the
    C++ object that torch.library.Library wraps, made directly. The wrapper's constructor looks up its
    caller's source line with traceback.extract_stack in torch 2.11, which read and split all of
    loader.py (via linecache) on every warm load: 0.2-0.3 ms on the GPU machine's host (session 37,
    call 1-2). Its other work (a set of registered keys that refuses a second Python kernel for one op
    and key) has nothing to do here: each build's namespace is new, and each op registers once."""
    library = _libraries.get(namespace)
    if library is None:
        library = _libraries[namespace] = torch._C._dispatch_library("FRAGMENT", namespace, "", __file__, 0)
    return library


def register_vmap(qualname: str, rule) -> None:
    """torch.library.register_vmap for our ops (rule(info, in_dims, *args) -> (output, out_dims)), at a
    fraction of its load time: torch's looks the op up and builds its overload packet when it registers;
    here that waits for the op's first call under vmap (ebm's 24 rules add ~0.3 ms to its warm load
    instead of ~1.9 ms, dev machine; ~0.9 ms on the GPU machine's host, session 31 call 4). The same
    FuncTorchBatched kernel as torch's otherwise."""
    _schema(qualname, "register_vmap")
    namespace, name = qualname.split("::")

    @functools.cache
    def overload():
        return getattr(getattr(torch.ops, namespace), name).default

    def batched_kernel(keyset, *args, **kwargs):
        from torch._functorch.autograd_function import custom_function_call_vmap_helper
        from torch._functorch.pyfunctorch import retrieve_current_functorch_interpreter

        return custom_function_call_vmap_helper(retrieve_current_functorch_interpreter(), rule, overload(),
                                                *args, **kwargs)

    _library(namespace).impl(name, "FuncTorchBatched", batched_kernel, True)  # True: with the keyset


def register_drawing_vmap(qualname: str, draws=None, in_place: bool = False) -> None:
    """torch.vmap for an op that draws random numbers, honouring vmap's `randomness`, as torch's own random
    ops do: "error" (vmap's default) raises; "different" runs the op once per sample, each with draws of
    its own; "same" runs it once per sample from one generator state, so every sample gets the same draws.
    torch's per-sample fallback gave every mode "different"'s draws (session 40's review). The generator
    is the op's `generator` argument, else the default one of the first tensor's device. `draws(*args,
    **kwargs)`, if given, says whether a call draws at all (ddpm_step with its noise given does not): one
    that does not runs under every mode. An op defined with jk::def_differentiable gets the rule on its
    `_autograd` twin too, which vmap(grad(...)) reaches.
    A call none of whose tensors is batched never reaches that rule (FuncTorchBatched): vmap's mode key
    (_register_unbatched_draws) gives it the randomness of torch.randn_like(unbatched). in_place (normal_out,
    langevin_step_): only that; a batched target is vmap's error ("Batching rule not implemented"), where
    torch's own in-place random ops (Tensor.normal_) take one: pass a tensor of the whole batch instead."""
    if _has_autograd_twin(qualname):
        register_drawing_vmap(f"{qualname}_autograd", draws, in_place)
    _register_unbatched_draws(qualname, draws, in_place)
    if in_place:
        return
    namespace, name = qualname.split("::")

    def rule(info, in_dims, *args, **kwargs):
        drawing = draws is None or draws(*args, **kwargs)
        if drawing and info.randomness == "error":
            _refuse_error_mode(name)
        op = getattr(getattr(torch.ops, namespace), name).default
        generator, state = None, None
        if drawing and info.randomness == "same":
            generator = kwargs.get("generator") or _generator_argument(op, args) or _default_generator(args)
            state = generator.get_state()
        outputs = []
        for b in range(info.batch_size):
            if state is not None:
                generator.set_state(state)
            sample = [_sample_of(a, d, b) for a, d in zip(args, in_dims)]
            outputs.append(op(*sample, **kwargs))
        if isinstance(outputs[0], tuple):
            return tuple(torch.stack(parts) for parts in zip(*outputs)), (0,) * len(outputs[0])
        return torch.stack(outputs), 0

    register_vmap(qualname, rule)


def _refuse_error_mode(name: str):
    raise RuntimeError(f"vmap: {name.removesuffix('_autograd')} draws random numbers, and vmap is in "
                       "randomness='error' mode (its default): pass randomness='different' or 'same' to "
                       "torch.vmap, or draw outside it")


def _register_unbatched_draws(qualname: str, draws, in_place: bool) -> None:
    """The FuncTorchVmapMode kernel of an op that draws, which every call under vmap meets, batched or not
    (torch's random ops have theirs at this key). A call with a tensor batched at this level goes on to the
    op's FuncTorchBatched rule. One with none, which ran once and broadcast its draws to every sample
    whatever the randomness (session 44), draws as torch.randn_like(unbatched) does: "error" raises, "same"
    calls the op once, "different" once per sample (batched output); an in-place op refuses "different",
    as torch's do (one unbatched tensor cannot hold each sample's draws)."""
    _schema(qualname, "register_drawing_vmap")
    namespace, name = qualname.split("::")
    exclude_mode = torch._C.DispatchKeySet(torch._C.DispatchKey.FuncTorchVmapMode)

    def kernel(keyset, *args, **kwargs):
        from torch._functorch.autograd_function import unwrap_batched
        from torch._functorch.pyfunctorch import retrieve_current_functorch_interpreter

        op = getattr(getattr(torch.ops, namespace), name).default
        interpreter = retrieve_current_functorch_interpreter()
        with torch._C._ExcludeDispatchKeyGuard(exclude_mode):
            _, in_dims = unwrap_batched((args, kwargs), interpreter.level())  # normal_out's out is a keyword
            if not torch.utils._pytree.tree_all(lambda d: d is None, in_dims) or not (
                    draws is None or draws(*args, **kwargs)):
                return op(*args, **kwargs)
            randomness = interpreter.randomness()
            if randomness == "error":
                _refuse_error_mode(name)
            if randomness == "same":
                return op(*args, **kwargs)
            if in_place:
                raise RuntimeError(f"vmap: {name} writes its draws into an unbatched tensor, which cannot hold "
                                   "different draws for every sample (randomness='different'): write into a "
                                   "batched tensor, or use randomness='same'")
            outputs = [op(*args, **kwargs) for _ in range(interpreter.batch_size())]

        def batched(parts):
            return torch._C._functorch._add_batch_dim(torch.stack(parts), 0, interpreter.level())

        return tuple(map(batched, zip(*outputs))) if isinstance(outputs[0], tuple) else batched(outputs)

    _library(namespace).impl(name, "FuncTorchVmapMode", kernel, True)  # True: with the keyset


def register_batch_dim_vmap(qualname: str) -> None:
    """torch.vmap for an op that takes any leading batch dimensions, equal across its tensors (relu_add's
    elementwise inputs, matrix_inverse_root's and kron's (..., m, n) matrices): the vmapped dimension becomes
    one more leading batch dimension of a single call, an unbatched tensor expanded to the vmapped size,
    instead of torch's fallback of one call per sample (which also warned of a performance drop, session
    41). Covers a differentiable op's `_autograd` twin too, as register_drawing_vmap does."""
    _schema(qualname, "register_batch_dim_vmap")
    if _has_autograd_twin(qualname):
        register_batch_dim_vmap(f"{qualname}_autograd")
    namespace, name = qualname.split("::")

    def rule(info, in_dims, *args):
        op = getattr(getattr(torch.ops, namespace), name.removesuffix("_autograd")).default
        args = [a.movedim(d, 0) if d is not None else
                a.expand(info.batch_size, *a.shape) if isinstance(a, torch.Tensor) else a
                for a, d in zip(args, in_dims)]
        out = op(*args)
        return out, ((0,) * len(out) if isinstance(out, tuple) else 0)

    register_vmap(qualname, rule)


def _has_autograd_twin(qualname: str) -> bool:
    """Whether jk::def_differentiable defined `<qualname>_autograd` beside the op (a twin has none: asking
    torch would raise, and a raised RuntimeError costs a warm load ~0.1 ms)."""
    if qualname.endswith("_autograd"):
        return False
    try:
        torch._C._get_schema(f"{qualname}_autograd", "")
        return True
    except RuntimeError:
        return False


def _sample_of(argument, in_dim, b):
    """Sample b of a vmapped argument: in_dim is None (not batched), a tensor's batch dimension, or for a
    list argument (the chains' params) a list of those."""
    if in_dim is None:
        return argument
    if isinstance(argument, (list, tuple)):
        return type(argument)(_sample_of(a, d, b) for a, d in zip(argument, in_dim))
    return argument.select(in_dim, b)


def _generator_argument(op, args):
    """The positional `generator` argument of op in args, if it has one and it is given."""
    return dict(zip((argument.name for argument in op._schema.arguments), args)).get("generator")


def _default_generator(args) -> torch.Generator:
    device = next(a.device for a in args if isinstance(a, torch.Tensor))
    return torch.cuda.default_generators[device.index if device.index is not None else torch.cuda.current_device()] \
        if device.type == "cuda" else torch.default_generator


def _forward_tangent_at(args) -> int | None:
    """The position of the first tensor argument that carries a forward-mode tangent (torch.func.jvp,
    jacfwd, hessian; torch.autograd.forward_ad), or None."""
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and torch._VF._unpack_dual(a, 0).tangent is not None:
            return i
    return None


def _forward_mode(name, argument, op, keyset, args, formula):
    """An op called with forward-mode tangents: the kernel's numbers with the derivatives of F =
    formula(value, *args), the op in PyTorch ops (register_autograd's forward_formula; value is the kernel's
    output, for what only it knows, such as where a clamp bit). value + (F - F.detach()) is the value, and
    its derivatives of every order, in either mode and under any transform, are F's, from torch's own rules.
    F may leave out terms whose derivative is 0 (drawn noise); None for an output leaves it constant."""
    if formula is None:
        raise RuntimeError(f"{name} has no forward-mode derivative, but its argument '{argument}' carries a "
                           "forward-mode tangent (torch.func.jvp, jacfwd or hessian, or torch.autograd.forward_ad): "
                           "use reverse mode (torch.func.vjp or jacrev; jacrev(jacrev(f)) for a Hessian)")
    value = _below_autograd(op, keyset, args)
    derivative = formula(value, *args)
    if isinstance(value, tuple):
        return tuple(v if f is None else v.detach() + (f - f.detach()).to(v.dtype) for v, f in zip(value, derivative))
    return value.detach() + (derivative - derivative.detach()).to(value.dtype)


def _apply_function(function, *args):
    """function.apply(*args) from an Autograd kernel, under torch.func transforms too. autograd.Function.apply
    hands the call to functorch whenever a transform is active, and functorch finds no kernel for it from
    inside the dispatcher. But an Autograd kernel is already at its transform's level, as ATen's C++ ones
    are: the node is recorded on that level's tensors, forward's re-dispatch below autograd reaches
    functorch, which unwraps them for the level below, and backward's ops see the transforms as any call
    does. functorch calls that a single-level Function (its own grad rule applies one the same way) and
    allows it only when asked: so torch.func.grad, vjp, jacrev and vmap of them work."""
    if not torch._C._are_functorch_transforms_active():
        return function.apply(*args)
    allowed = torch._C._functorch.get_single_level_autograd_function_allowed()
    torch._C._functorch.set_single_level_autograd_function_allowed(True)
    try:
        return function.apply(*args)
    finally:
        torch._C._functorch.set_single_level_autograd_function_allowed(allowed)


def check_numbers(**values) -> None:
    """For an op's Python face: a schema `float` reads a tensor given for it as a plain number, so a tensor
    that carries a derivative (an nn.Parameter, a forward-mode dual) lost it in silence, with only torch's
    generic warning (harmonic_energy(x, k) left k.grad None where reference.py's formula gives one). Such a
    tensor is refused by name; one without a derivative is still a number."""
    for name, value in values.items():
        if type(value) in (float, int):  # the usual case, at once: isinstance(value, torch.Tensor) took ~0.6 us
            continue
        if isinstance(value, torch.Tensor) and ((value.requires_grad and torch.is_grad_enabled())
                                                or torch.autograd.forward_ad.unpack_dual(value).tangent is not None):
            raise TypeError(f"{name} is read as a number (the op is not differentiable in it), but the tensor given "
                            f"carries a gradient that would be dropped: pass {name}.detach() or a float")


def vjp_by_autograd(formula, inputs, needs_input_grad, grad_output):
    """For a backward given to register_autograd: the gradient of <grad_output, formula(*inputs)> for
    each input that needs one (None for the others), by autograd through `formula`, the op written in
    PyTorch ops (usually its reference). With grad mode on (a backward with create_graph=True) the
    gradients are differentiable again, so derivatives of any order come out right."""
    wanted = [i for i, (x, need) in enumerate(zip(inputs, needs_input_grad)) if need and isinstance(x, torch.Tensor)]
    result = [None] * len(inputs)
    if not wanted:
        return tuple(result)
    # The vjp_fn of a finished torch.func.vjp runs backward on that level's saved tensors, now dead
    # wrappers, which no transform can differentiate: the tensors they wrap (as autograd.Function.apply does)
    inputs = torch._functorch.utils.unwrap_dead_wrappers(tuple(inputs))
    create_graph = torch.is_grad_enabled()
    in_graph = sum(isinstance(x, torch.Tensor) and x.requires_grad for x in inputs) if create_graph else 0
    # Under torch.func transforms, this level's tensors: torch.func.vjp, not autograd.grad. Also for create_graph
    # with two or more inputs in the outer graph: autograd.grad from them also took that graph's paths between
    # them (model_output = net(sample)), which autograd then added again (ddpm_step's gradient in sample was
    # wrong, session 45's derivative review). torch.func.vjp takes ~1.4x as long on the CPU.
    if in_graph > 1 or torch._C._are_functorch_transforms_active():
        return _vjp_by_functorch(formula, inputs, wanted, grad_output)
    args = list(inputs)
    for i in wanted:  # a graph of its own, from detached inputs, where no graph is to be kept or joined
        if not (create_graph and inputs[i].requires_grad):
            args[i] = inputs[i].detach().requires_grad_()
    with torch.enable_grad():
        output = formula(*args)
        # No wanted input reaches the output (ddim_step's noise at eta = 0): zeros, as torch.func.vjp gives
        # (autograd.grad raised "element 0 of tensors does not require grad", session 45's derivative review).
        if not output.requires_grad:
            return tuple(torch.zeros_like(x) if i in wanted else None for i, x in enumerate(inputs))
        grads = torch.autograd.grad(output, [args[i] for i in wanted], grad_output.to(output.dtype),
                                    create_graph=create_graph, allow_unused=True)
    for i, grad in zip(wanted, grads):
        result[i] = grad
    return tuple(result)


def _vjp_by_functorch(formula, inputs, wanted, grad_output):
    """vjp_by_autograd under torch.func transforms: a backward there sees the transform level's tensors,
    which torch.autograd.grad cannot differentiate at their level; torch.func.vjp can, and its gradients
    are differentiable by any outer level (plain autograd's too: a backward with create_graph=True)."""
    def formula_of_wanted(*wanted_inputs):
        args = list(inputs)
        for i, value in zip(wanted, wanted_inputs):
            args[i] = value
        return formula(*args)

    output, vjp_fn = torch.func.vjp(formula_of_wanted, *(inputs[i] for i in wanted))
    result = [None] * len(inputs)
    for i, grad in zip(wanted, vjp_fn(grad_output.to(output.dtype))):
        result[i] = grad
    return tuple(result)


def _below_autograd(op, keyset, args):
    """op(*args) re-dispatched below the Autograd key (register_autograd's kernels)."""
    with torch._C._AutoDispatchBelowAutograd():
        return op.redispatch(keyset & torch._C._after_autograd_keyset, *args)


def _reduce_family_object(family: str, namespace: str, name: str, obj):
    """pickle (and copy) of an instance of a class that a family's ops.py exports (CEMResult, Shampoo), registered
    with copyreg by Family._bind. Pickled by reference, the class named the build's private module
    `_jk_ops_<namespace>`, which no other process can import: torch.load of a saved CEMResult or Shampoo in a new
    process raised ModuleNotFoundError (session 45). The same reduction, with the class named by family and
    build instead (_new_family_object)."""
    function, args, *rest = obj.__reduce_ex__(2)
    if function is not copyreg.__newobj__:
        return (function, args, *rest)
    return (_new_family_object, (family, namespace, name, tuple(args[1:])), *rest)


def _new_family_object(family: str, namespace: str, name: str, args: tuple):
    """An unpickled instance of ops.py's class `name`: that of the build it was pickled from where this process
    has that build, else that of the family's current build (loaded from the default kernels root)."""
    module = sys.modules.get(f"_jk_ops_{namespace}")
    cls = getattr(module if module is not None else load(family), name)
    return cls.__new__(cls, *args)


def _reference_module(family: str, path: Path) -> types.ModuleType:
    """A family's reference.py, run on first use (a reload runs an edited one anew): Family.reference,
    and ops.py's load_reference for backward formulas. One module per file: two kernels roots holding a
    family of one name shared the first one's (session 40's review)."""
    module_name = _reference_module_name(family, path)
    module = sys.modules.get(module_name)
    return module if module is not None else _exec_module(module_name, path, {})


def _reference_module_name(family: str, path: Path) -> str:
    return f"_jk_reference_{family}_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"


def _with_filename(code: types.CodeType, filename: str) -> types.CodeType:
    """code, and the code objects nested in it, naming filename: a build is shared by every checkout of the same
    sources, and its cached ops.py code names the file of the checkout that built it (tracebacks, profilers
    and debuggers then pointed at another checkout's lines)."""
    if code.co_filename == filename:
        return code
    nested = tuple(_with_filename(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=nested)


def _exec_module(module_name: str, path: Path, injected: dict, code_cache: Path | None = None) -> types.ModuleType:
    """Run the file at path as a module. Not through Python's import system: its __pycache__ trusts a
    source whose size and modification second match, so an edit of ops.py within the same second ran the
    old code after reload (session 40's review). ops.py's code is cached instead in its build's folder
    (code_cache: the key covers ops.py's bytes and the Python version); other files compile each time."""
    code = None
    if code_cache is not None:
        with contextlib.suppress(OSError, ValueError, EOFError, TypeError):
            code = _with_filename(marshal.loads(code_cache.read_bytes()), str(path))
    if code is None:
        code = compile(path.read_bytes(), str(path), "exec", dont_inherit=True)  # not loader.py's __future__ flags
        if code_cache is not None:
            _write_bytes_atomically(code_cache, marshal.dumps(code))
    module = types.ModuleType(module_name)
    module.__file__ = str(path)
    module.__dict__.update(injected)
    sys.modules[module_name] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


class Family:
    """A loaded kernel family: its ops are attributes (see `dir(family)`)."""

    def __init__(self, name: str, root: Path):
        self.name = name
        self.root = root
        self._op_names: list[str] = []

    def _bind(self, spec: _Spec) -> None:
        ops_module = sys.modules.get(f"_jk_ops_{spec.namespace}")  # one binding per build: ops.py registers
        if ops_module is None and (spec.dir / "ops.py").is_file():    # autograd and fakes, which can't repeat
            load_reference = functools.partial(_reference_module, spec.name, spec.dir / "reference.py")
            ops_module = _exec_module(f"_jk_ops_{spec.namespace}", spec.dir / "ops.py",
                                      {"NAMESPACE": spec.namespace, "register_autograd": register_autograd,
                                       "register_vmap": register_vmap, "register_drawing_vmap": register_drawing_vmap,
                                       "register_batch_dim_vmap": register_batch_dim_vmap,
                                       "vjp_by_autograd": vjp_by_autograd,
                                       "check_numbers": check_numbers,
                                       "load_reference": load_reference},
                                      code_cache=spec.out_dir / OPS_CODE)
        names = list(getattr(ops_module, "__all__", [])) if ops_module else []
        if not names:  # no ops.py: expose the raw torch.ops overload packets
            prefix = f"{spec.namespace}::"
            names = sorted({op[len(prefix):].split(".")[0] for op in torch._C._dispatch_get_all_op_names()
                            if op.startswith(prefix)})
            source = getattr(torch.ops, spec.namespace)
        else:
            source = ops_module
        taken = sorted(set(names) & _FAMILY_ATTRIBUTES)
        if taken:
            raise ValueError(f"{spec.name}: ops named {taken} would hide the family's own attributes of those "
                             f"names: rename them in ops.py's __all__")
        # Every new op is looked up before any attribute changes (a name missing from ops.py left the family
        # without its ops for good), and old ones are only replaced, never deleted first (other threads
        # calling an op during a reload found it missing: session 40's review).
        ops = {op: getattr(source, op) for op in names}
        # Only the default root's family renames its functions (below) and gives them back their build's names when it
        # moves to another build: a copy of the family elsewhere with the same sources binds the same functions, and
        # its reload had taken loader.fused's names away (examples/kernel_iteration.ipynb, in CI).
        default_root = self.root == kernels_root()
        for op in self._op_names if default_root else ():  # the previous build's functions (kept by callers)
            old = self.__dict__.get(op)
            if isinstance(old, types.FunctionType) and old.__module__ == __name__:
                old.__module__, old.__qualname__ = f"_jk_ops_{self.namespace}", op
        # ops.py's classes and functions pickle by family, not by the build's private module (no other process has it)
        for op, value in ops.items():
            if ops_module is None or getattr(value, "__module__", None) != ops_module.__name__:
                continue
            if isinstance(value, type):  # its classes, by family and build
                copyreg.pickle(value, functools.partial(_reduce_family_object, spec.name, spec.namespace, op))
            elif isinstance(value, types.FunctionType) and default_root:
                # An op kept by a model (self.act = fused.relu_add) pickled as _jk_ops_jk_fused_<key>.relu_add:
                # torch.load raised ModuleNotFoundError in a process without that build (session 53's review). As
                # loader.fused.relu_add it unpickles to the family's current build, loading it if need be.
                value.__module__, value.__qualname__ = __name__, f"{spec.name}.{op}"
        for op, value in ops.items():
            setattr(self, op, value)
        for op in set(self._op_names) - set(ops):
            delattr(self, op)
        self._op_names = names
        self.key, self.namespace, self.cuda = spec.key, spec.namespace, spec.cuda
        self.library = spec.library
        self.module, self._reference_path = ops_module, spec.dir / "reference.py"
        # a reload runs an edited reference.py anew
        sys.modules.pop(_reference_module_name(spec.name, spec.dir / "reference.py"), None)
        self.__doc__ = (ops_module.__doc__ if ops_module else None) or f"jitkernels family {spec.name}"

    @property
    def reference(self):
        """reference.py, the family's ops in plain PyTorch (run on first use: loads need not pay it)."""
        path = getattr(self, "_reference_path", None)
        return None if path is None or not path.is_file() else _reference_module(self.name, path)

    @property
    def ops(self):
        """The raw `torch.ops` namespace of the current build."""
        return getattr(torch.ops, self.namespace)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._op_names))

    def __reduce__(self):
        """pickle and copy.deepcopy (of a model that keeps a family: self.ops = loader.fused) give the family
        loaded by name: `cannot pickle 'module' object` before (session 53's review)."""
        return (load, (self.name,) if self.root == kernels_root() else (self.name, str(self.root)))

    def __repr__(self):
        halves = "C++ + CUDA" if self.cuda else "C++"
        return f"<jitkernels family {self.name!r} ({halves}), ops: {', '.join(self._op_names)}>"


# Names a family object holds itself, which an op must not take (ops.py exporting `cuda` had made f.cuda False).
_FAMILY_ATTRIBUTES = {"name", "root", "key", "namespace", "cuda", "library", "module", "reference", "ops"}


def load(name: str, root: str | os.PathLike | None = None) -> Family:
    """The family `name`, built on first use and loaded from the cache afterwards."""
    with _process_lock:
        base = kernels_root(root)
        family = _families.get(f"{base}::{name}")
        if family is not None:
            return family
        spec = _Spec(name, base)
        _load_library(spec)
        family = Family(name, base)
        family._bind(spec)
        _families[f"{base}::{name}"] = family
        return family


def prebuild(names: str | list[str] | None = None, root: str | os.PathLike | None = None) -> None:
    """Build the families (all by default; a name or a list of names) that the cache lacks, several at once
    where the machine has the cores (one process each), so a first run waits for the slowest family, not
    for the sum. A name that is no family raises ValueError; a build failure raises nothing here: that
    family raises its BuildError when it is loaded."""
    import loader_build

    if isinstance(names, str):  # prebuild("fused") was list("fused"): five letters, none a family, nothing built
        names = [names]
    base = kernels_root(root)
    for name in names or []:
        _Spec(name, base)  # a name that is no family raises here (build_at_once skips it, for load to say so)
    loader_build.build_at_once(list(names) if names is not None else families(root), base)


def reload(name: str, root: str | os.PathLike | None = None) -> Family:
    """Rebuild `name` if any input of its build changed and rebind the same family object."""
    with _process_lock:
        base = kernels_root(root)
        family = _families.get(f"{base}::{name}")
        spec = _Spec(name, base, reread_sources=True)
        _failed_keys.pop(spec.key, None)  # reload always tries a failed build again
        if family is None:
            return load(name, root)
        if spec.key != family.key:
            _load_library(spec)
        family._bind(spec)
        return family


def _library_file(namespace: str) -> str:
    """The file name of a build's library in its cache folder."""
    return f"{namespace}{'.dll' if os.name == 'nt' else '.so'}"


def _loadable_cached_build(name: str, namespace: str) -> Path | None:
    """The library of the cached build `namespace` of family `name`, if the cache holds it whole (its sha256 as
    its manifest records) and it was built for this torch (and a CUDA build only where torch has CUDA)."""
    for folder in sorted((cache_dir() / name).glob(namespace[-12:] + "*")):
        library = folder / _library_file(namespace)
        try:
            manifest = json.loads((folder / MANIFEST).read_text())
            if (manifest["namespace"] == namespace and manifest["torch"] == torch.__version__
                    and (not manifest["cuda"] or torch.version.cuda is not None)
                    and _sha256(library) == manifest["library_sha256"]):
                return library
        except (OSError, ValueError, KeyError, TypeError):  # no manifest or library: not a published build
            continue
    return None


def load_for(path: str | os.PathLike, root: str | os.PathLike | None = None) -> dict[str, list[str]]:
    """Make this process able to run an exported program or AOTInductor package (a .pt2 file of
    `torch.export.save` or `torch._inductor.aoti_compile_and_package`) that calls our ops: call it before torch
    loads the file. Returns {family: [op namespaces the file calls]}.

    A saved program names each op by its build, torch.ops.jk_<family>_<key>.<op>, and the key covers the
    family's sources, the compiler, the CUDA half and torch: an edited kernel or the CPU-only build of a GPU
    export is another namespace, where torch only says "Could not find schema for ...". Each family the file
    calls is loaded; a build it names that is not the family's current one is loaded from the cache while the
    cache still holds it (its C++ kernels: enough to run the program), else ValueError names both builds."""
    import zipfile

    names = families(root)
    wanted: dict[str, list[str]] = {}
    with zipfile.ZipFile(path) as archive:
        for member in archive.infolist():
            if member.file_size > 64 << 20:  # weights, not a graph or generated code
                continue
            data = archive.read(member)
            for name in names:
                for key in re.findall(rb"jk_" + re.escape(name.encode()) + rb"_([0-9a-f]{12})(?![0-9a-z_])", data):
                    namespace = f"jk_{name}_{key.decode()}"
                    if namespace not in wanted.setdefault(name, []):
                        wanted[name].append(namespace)
    registered = {op.split("::")[0] for op in torch._C._dispatch_get_all_op_names()}
    for name, namespaces in wanted.items():
        current = load(name, root).namespace
        for namespace in namespaces:
            if namespace == current or namespace in registered:
                continue
            library = _loadable_cached_build(name, namespace)
            if library is None:
                raise ValueError(
                    f"{path} calls {name}'s ops as built by {namespace}, and this process builds {current} "
                    f"(other sources of {name}, another compiler, CUDA half or torch), and the cache "
                    f"{cache_dir() / name} holds no build {namespace} for this torch ({torch.__version__}): export "
                    f"the program again from this build, or run it where {name}'s sources and toolchain are those "
                    f"it was exported with")
            torch.ops.load_library(str(library))
    return wanted


def __getattr__(name: str) -> Family:
    """`loader.fused` is `loader.load("fused")`."""
    if not name.startswith("_") and name in families():
        return load(name)
    raise AttributeError(f"module 'loader' has no attribute {name!r} (families: {', '.join(families())})")


def __dir__():
    return sorted(set(globals()) | set(families()))




# ---------------------------------------------------------------- CLI (in loader_build.py)

def info() -> dict:
    """What builds here: versions, compilers, archs, cache folder."""
    import loader_build

    return loader_build.info()


def main(argv: list[str] | None = None) -> int:
    """`python loader.py list | build | clean | info` (see --help)."""
    import loader_build

    return loader_build.main(argv)


if __name__ == "__main__":
    import loader  # run the CLI on the importable module, so ops.py files see one loader

    sys.exit(loader.main())
