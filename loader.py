"""jitkernels loader: the only entry point.

    import loader
    f = loader.fused              # builds on first use, loads from the cache afterwards
    f.relu_add(x, y, 0.5)
    loader.reload("fused")        # after editing kernels/fused/*: same `f`, new code

A family is a folder `kernels/<name>/` holding `<name>.cpp` (op schemas, CPU
kernels), optionally `<name>.cu` (CUDA kernels), `ops.py` (the Python face) and
`reference.py` (plain PyTorch). Each build is keyed by a sha256 over everything
that changes the binary; a cached build whose library matches the sha256 in its
manifest is loaded with `torch.ops.load_library` alone (no ninja, no subprocess, no
lock); anything else is rebuilt under a per-family file lock. Run `python loader.py --help` for the CLI.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

import torch

__all__ = ["BuildError", "Family", "families", "load", "reload", "cache_dir", "info", "register_autograd"]

REPO = Path(__file__).resolve().parent
# Bump when the way a build is made changes, so old cache entries are not reused.
RECIPE_VERSION = "3"  # 2: the manifest records the library's sha256; 3: and its size and mtime


def _host_vector_flags(cpuinfo_path: str = "/proc/cpuinfo") -> list[str]:
    """-mavx2 -mfma -mf16c where this CPU has them (x86 Linux: the flags line of /proc/cpuinfo). The C++
    half is built on the machine that loads it, and the flags are part of the cache key: a cache shared
    with a CPU without them gets its own build. The CPU loops then run 8 floats wide with fused
    multiply-adds (session 10, 2 cores: Rastrigin score 2.6x, Langevin step 1.7x, most ops 1.1-1.9x,
    none slower beyond noise); -march=native (AVX-512 there) made half the row reductions 2x slower."""
    try:
        with open(cpuinfo_path) as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return ["-mavx2", "-mfma", "-mf16c"] if {"avx2", "fma", "f16c"} <= set(line.split()) else []
    except OSError:
        pass
    return []


# The C++ standard is the one torch asks for. -fno-math-errno: sqrt need not set errno (nothing reads
# it), which is what lets the compiler vectorize the CPU loops that take square roots.
# -fno-trapping-math: no floating-point operation traps (nothing here unmasks FP exceptions), so g++
# may compute both sides of a select and vectorize the loops with them (jk::cos_pi_float). -fopenmp:
# at::parallel_for is a header template whose OpenMP pragma compiles into our code, and without it
# every CPU kernel ran on one thread (found in session 8). Only where torch itself uses OpenMP (its
# Linux builds); compile-only, so the calls bind to the libgomp torch has loaded (one runtime in
# the process, and no libgomp needed at link time); elsewhere torch's own pool needs nothing.
# Then the host's vector extensions (above).
CXX_FLAGS = ["-O3", "-fno-math-errno", "-fno-trapping-math", *(["-fopenmp"] if torch._C.has_openmp else []),
             *_host_vector_flags()]
CUDA_FLAGS = ["-O3", "--expt-relaxed-constexpr"]
# The GPU image's compiler (CXX=/opt/gcc/bin/g++) links libstdc++ statically, and every library then
# exported its ~4000 symbols: each one a lookup through the whole process at dlopen (1.2 ms of a 4 ms
# warm load of fused there, session 14), and exported they can bind half to the process's own
# libstdc++ (likely the number-streaming crash in README's Known issues). --exclude-libs keeps a
# static archive's symbols inside our library; with a shared libstdc++ (the CPU machine) it changes nothing.
LINK_FLAGS = ["-Wl,--exclude-libs,ALL"] if sys.platform.startswith("linux") else []
DEFAULT_CUDA_ARCH = "9.0"  # forced CUDA builds with no GPU and no TORCH_CUDA_ARCH_LIST
MANIFEST = "manifest.json"

_process_lock = threading.RLock()
_families: dict[str, "Family"] = {}
_loaded_namespaces: set[str] = set()  # op namespaces whose library is in this process


class BuildError(RuntimeError):
    """A family failed to build; the message starts with the first compiler error."""


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


def _verbose() -> bool:
    return bool(_env_flag("JITKERNELS_VERBOSE"))


def kernels_root(root: str | os.PathLike | None = None) -> Path:
    """The folder holding the families: the argument, $JITKERNELS_ROOT, or the repo's kernels/."""
    return Path(root or os.environ.get("JITKERNELS_ROOT") or REPO / "kernels").resolve()


def cache_dir() -> Path:
    """$JITKERNELS_CACHE, else ~/.cache/jitkernels (or $XDG_CACHE_HOME/jitkernels)."""
    if os.environ.get("JITKERNELS_CACHE"):
        return Path(os.environ["JITKERNELS_CACHE"]).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base, "jitkernels").resolve()


def families(root: str | os.PathLike | None = None) -> list[str]:
    """Sorted names of the families under the kernels root."""
    base = kernels_root(root)
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if (p / f"{p.name}.cpp").is_file())


def _common_dir(root: Path) -> Path:
    return root / "common" if (root / "common").is_dir() else REPO / "kernels" / "common"


def _cuda_wanted(family_dir: Path) -> bool:
    """Whether to build the CUDA half: JITKERNELS_CUDA, else whether a GPU is usable."""
    if not (family_dir / f"{family_dir.name}.cu").is_file():
        return False
    forced = _env_flag("JITKERNELS_CUDA")
    if forced is not None:
        return forced
    return torch.version.cuda is not None and torch.cuda.is_available()


def _cuda_arch_list() -> str:
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    if torch.cuda.is_available():
        caps = {torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())}
        return ";".join(f"{major}.{minor}" for major, minor in sorted(caps))
    return DEFAULT_CUDA_ARCH


def _cuda_home() -> Path | None:
    """CUDA toolkit folder: $CUDA_HOME/$CUDA_PATH, torch's guess if it has headers, /usr/local/cuda."""
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent.parent))
    candidates.append("/usr/local/cuda")
    for candidate in candidates:
        if candidate and (Path(candidate) / "include" / "cuda_runtime.h").is_file():
            return Path(candidate)
    return None


def _file_identity(path: str | None) -> list:
    """Path, size and mtime of a tool: changes when the tool is upgraded, costs one stat."""
    if not path:
        return [None]
    real = os.path.realpath(path)
    stat = os.stat(real)
    return [real, stat.st_size, stat.st_mtime_ns]


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CXX", "c++"))


# ---------------------------------------------------------------- the build spec

class _Spec:
    """Everything that decides one family's binary, and the cache key over it."""

    def __init__(self, name: str, root: Path, cuda: bool | None = None):
        self.name = name
        self.root = root
        self.dir = root / name
        if not (self.dir / f"{name}.cpp").is_file():
            known = ", ".join(families(root)) or "none"
            raise ValueError(f"no kernel family {name!r} under {root} (families: {known})")
        self.common = _common_dir(root)
        self.cuda = _cuda_wanted(self.dir) if cuda is None else cuda and (self.dir / f"{name}.cu").is_file()
        self.arch_list = _cuda_arch_list() if self.cuda else None
        self.sources = [self.dir / f"{name}.cpp"] + ([self.dir / f"{name}.cu"] if self.cuda else [])
        self.key = self._key()
        self.namespace = f"jk_{name}_{self.key[:12]}"
        self.family_cache = cache_dir() / name
        self.out_dir = self.family_cache / self.key
        self.library = self.out_dir / f"{self.namespace}{'.dll' if os.name == 'nt' else '.so'}"

    def _hashed_files(self) -> list[str]:
        return ([p for p in _files_under(str(self.dir)) if os.path.basename(p) != "reference.py"]
                + _files_under(str(self.common)))

    def _key(self) -> str:
        h = hashlib.sha256()
        for path in self._hashed_files():  # strings, not Paths: pathlib is slow on Python 3.12 (warm path)
            folder, name = os.path.split(path)
            h.update(f"{os.path.basename(folder)}/{name}".encode() + b"\0")
            with open(path, "rb") as source:
                h.update(source.read() + b"\0")
        config = {
            "recipe": RECIPE_VERSION,
            "family": self.name,
            "cxx_flags": CXX_FLAGS, "cuda_flags": CUDA_FLAGS if self.cuda else None, "link_flags": LINK_FLAGS,
            "torch": torch.__version__, "torch_git": torch.version.git_version,
            "torch_cuda": torch.version.cuda, "cxx11_abi": torch._C._GLIBCXX_USE_CXX11_ABI,
            "cxx": _file_identity(_compiler()),
            "nvcc": _file_identity(shutil.which("nvcc")) if self.cuda else None,
            "archs": self.arch_list,
            "python": [sys.implementation.cache_tag, importlib.machinery.EXTENSION_SUFFIXES[0], platform.machine()],
        }
        h.update(json.dumps(config, sort_keys=True).encode())
        return h.hexdigest()

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
            if _stat_identity(self.library) == manifest["library_stat"]:
                return True
            return _sha256(self.library) == manifest["library_sha256"]
        except (OSError, ValueError, KeyError):
            return False


def _stat_identity(path: Path) -> list[int]:
    info = path.stat()
    return [info.st_size, info.st_mtime_ns]


def _files_under(folder: str) -> list[str]:
    """Regular files below folder, sorted, skipping __pycache__. os.scandir knows each entry's
    type without a stat call, which keeps the warm path's key computation cheap."""
    found = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    found += _files_under(entry.path)
            elif entry.is_file():
                found.append(entry.path)
    return sorted(found)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------- building

# Patterns, not compiled regexes: they serve failed builds only, and compiling them at import
# would cost every warm load (re compiles and caches them on first use).
_GCC_ERROR = r"^(?P<path>[^\s:][^:]*):(?P<line>\d+):(?:\d+:)?\s*(?:fatal )?error:\s*(?P<msg>.*)$"
_NVCC_ERROR = r"^(?P<path>[^\s(][^(]*)\((?P<line>\d+)\):\s*(?:catastrophic )?error:?\s*(?P<msg>.*)$"
_LINK_ERROR = r"(undefined (symbol|reference).*|ld: .*error.*)$"


def _first_compiler_error(log: str) -> str:
    for line in log.splitlines():
        line = line.strip()
        for pattern in (_GCC_ERROR, _NVCC_ERROR):
            m = re.match(pattern, line)
            if m:
                return f"{m['path']}:{m['line']}: {m['msg']}"
    for line in log.splitlines():
        if re.search(_LINK_ERROR, line):
            return line.strip()
    return "build failed (no compiler error line found)"


def _cpp_extension():
    """torch.utils.cpp_extension, imported on the cold path only, without its CUDA_HOME guess warning."""
    import logging

    if not _verbose():
        logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    from torch.utils import cpp_extension

    return cpp_extension


def _check_toolchain(spec: _Spec) -> None:
    """One sentence per missing tool, saying how to fix it."""
    cpp_extension = _cpp_extension()

    if not cpp_extension.is_ninja_available():
        raise BuildError("ninja is not installed: run `pip install ninja` (torch builds extensions with it).")
    if not _compiler():
        raise BuildError(f"no C++ compiler found ({os.environ.get('CXX', 'c++')}): install g++ or set CXX.")
    if not spec.cuda:
        return
    if torch.version.cuda is None:
        raise BuildError("this torch is a CPU-only build, so the CUDA half cannot be built: "
                         "set JITKERNELS_CUDA=0 or install a CUDA build of torch.")
    home = _cuda_home()
    if home is None or not (home / "bin" / "nvcc").exists():
        raise BuildError("nvcc was not found: install the CUDA toolkit and set CUDA_HOME, "
                         "or set JITKERNELS_CUDA=0 to build the CPU half only.")
    nvcc_major = _nvcc_version(home).split(".")[0]
    torch_major = torch.version.cuda.split(".")[0]
    if nvcc_major != torch_major:
        raise BuildError(f"nvcc at {home} is CUDA {_nvcc_version(home)} but torch was built with CUDA "
                         f"{torch.version.cuda}: install a CUDA {torch_major}.x toolkit and point CUDA_HOME "
                         f"at it, or install a torch built for CUDA {nvcc_major}.")
    # torch guesses its CUDA_HOME once at import; make it use the toolkit found here.
    os.environ["CUDA_HOME"] = str(home)
    cpp_extension.CUDA_HOME = str(home)


def _nvcc_version(home: Path) -> str:
    import subprocess

    out = subprocess.run([str(home / "bin" / "nvcc"), "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else "unknown"


class _Progress:
    """One live status line on stderr while a family compiles."""

    def __init__(self, spec: _Spec):
        self.text = f"[jitkernels] building {spec.name} ({spec.halves()})"
        self.live = sys.stderr.isatty() or "ipykernel" in sys.modules
        self.start = time.perf_counter()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.done.wait(0.5):
            sys.stderr.write(f"\r{self.text} {time.perf_counter() - self.start:.0f}s")
            sys.stderr.flush()

    def __enter__(self):
        if self.live:
            self.thread.start()
        else:
            print(f"{self.text} ...", file=sys.stderr, flush=True)
        return self

    def __exit__(self, exc_type, *_):
        self.done.set()
        if self.live:
            self.thread.join()
        outcome = "failed" if exc_type else "done"
        end = "\r" if self.live else ""
        print(f"{end}{self.text} {outcome} in {time.perf_counter() - self.start:.1f}s", file=sys.stderr, flush=True)


def _ninja_step_seconds(build_dir: Path) -> dict[str, float]:
    """Seconds per ninja step (each object file and the link), from ninja's own log."""
    steps = {}
    log = build_dir / ".ninja_log"
    if log.is_file():
        for line in log.read_text().splitlines()[1:]:
            start, end, _, output, *_ = line.split("\t")
            steps[output] = (int(end) - int(start)) / 1000
    return steps


# Errors of a write into the cache, and what the user can do about each.
_NO_SPACE = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}
_NOT_WRITABLE = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EEXIST}
_NO_SPACE_TEXT = r"(?i)no space left on device|file too large|file size limit exceeded|disk quota exceeded"


def _cache_write_error(exc: OSError, spec: _Spec) -> BuildError | None:
    """The one-sentence error for a failed write into the cache, or None if `exc` is something else."""
    # a copy's error names the source first, the file written second
    written = exc.filename2 or exc.filename or spec.family_cache
    if exc.errno in _NO_SPACE:
        return BuildError(f"{exc.strerror} while writing {written}: free space under "
                          f"{cache_dir()} or set JITKERNELS_CACHE to a folder with room, then load {spec.name!r} again.")
    if exc.errno in _NOT_WRITABLE:
        return BuildError(f"the jitkernels cache folder {cache_dir()} is not writable ({exc.strerror}: "
                          f"{written}), so {spec.name!r} cannot be built: set JITKERNELS_CACHE to a writable folder.")
    return None


def _compile_error(spec: _Spec, log: str, build_dir: Path) -> BuildError:
    """The first compiler error (or the full disk that stopped the compiler), and where the full log is."""
    log_path = spec.family_cache / f"build-{spec.key[:12]}.log"
    try:
        log_path.write_text(log)
        where = f"full log: {log_path}"
    except OSError as exc:  # the disk may be the very problem
        where = f"the log could not be written to {log_path} ({exc.strerror})"
    full = next((line.strip() for line in log.splitlines() if re.search(_NO_SPACE_TEXT, line)), None)
    if full:
        return BuildError(f"{full}\nthe disk filled up while writing {build_dir} (or the temporary folder) for "
                          f"family {spec.name!r}: free space under {cache_dir()} or set JITKERNELS_CACHE to a folder "
                          f"with room, then load it again; {where}")
    return BuildError(f"{_first_compiler_error(log)}\n"
                      f"building family {spec.name!r} ({spec.halves()}) failed; {where}")


def _clear_leftovers(spec: _Spec) -> None:
    """Delete build folders of builders that were killed: only lock holders build, so none is in use."""
    for path in spec.family_cache.glob("build-*"):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)


def _build(spec: _Spec) -> None:
    """Compile the family into a private folder and publish it at spec.out_dir by rename.

    Called with the family's file lock held, so no other process builds it now."""
    _check_toolchain(spec)
    _clear_leftovers(spec)
    # A new folder per build, never a reused one: the compilers of a killed builder may still
    # be writing into its folder, and must not write into this build.
    build_dir = Path(tempfile.mkdtemp(prefix=f"build-{spec.key[:12]}-", dir=spec.family_cache))
    try:
        start = time.perf_counter()
        _compile(spec, build_dir)
        _publish(spec, build_dir, time.perf_counter() - start)
    finally:  # a failed build leaves nothing behind (on a full disk, its files are the problem)
        shutil.rmtree(build_dir, ignore_errors=True)


def _compile(spec: _Spec, build_dir: Path) -> None:
    """cpp_extension.load into build_dir, which also loads the library into this process."""
    cpp_extension = _cpp_extension()

    defines = [f"-DJK_NAMESPACE={spec.namespace}"] + (["-DJK_WITH_CUDA"] if spec.cuda else [])
    saved_arch = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if spec.cuda:
        os.environ["TORCH_CUDA_ARCH_LIST"] = spec.arch_list
    try:
        with _Progress(spec):
            cpp_extension.load(
                name=spec.namespace,
                sources=[str(s) for s in spec.sources],
                extra_cflags=CXX_FLAGS + defines,
                extra_cuda_cflags=CUDA_FLAGS + defines,
                extra_ldflags=list(LINK_FLAGS),
                extra_include_paths=[str(spec.common)],
                build_directory=str(build_dir),
                verbose=_verbose(),
                with_cuda=spec.cuda,
                is_python_module=False,
            )
    except Exception as exc:  # the compiler's output is in the message
        if isinstance(exc, OSError) and exc.errno is not None:
            raise  # a write that failed (full disk, read-only cache): _load_library says what to do
        raise _compile_error(spec, str(exc), build_dir) from None
    finally:
        if saved_arch is None:
            os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = saved_arch
    _loaded_namespaces.add(spec.namespace)


def _publish(spec: _Spec, build_dir: Path, build_seconds: float) -> None:
    """Library + manifest (with its sha256) into a folder renamed to spec.out_dir in one step."""
    staging = build_dir / "publish"
    staging.mkdir()
    shutil.copy2(build_dir / spec.library.name, staging / spec.library.name)
    manifest = {
        "family": spec.name, "key": spec.key, "namespace": spec.namespace, "cuda": spec.cuda,
        "archs": spec.arch_list, "torch": torch.__version__,
        "library_bytes": (staging / spec.library.name).stat().st_size,
        "library_sha256": _sha256(staging / spec.library.name),
        "library_stat": _stat_identity(staging / spec.library.name),  # os.rename keeps size and mtime
        "build_seconds": round(build_seconds, 2),
        "step_seconds": _ninja_step_seconds(build_dir),
    }
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=1))
    if spec.out_dir.exists():  # published earlier but damaged since (cached_build_complete said no)
        print(f"[jitkernels] replacing the damaged cached build at {spec.out_dir}", file=sys.stderr, flush=True)
        shutil.rmtree(spec.out_dir, ignore_errors=True)
    os.rename(staging, spec.out_dir)  # atomic: readers see all of it or nothing


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


@contextlib.contextmanager
def _family_lock(spec: _Spec):
    """The family's build lock (the OS drops it if the holder dies); says so when it has to wait."""
    from filelock import FileLock, Timeout

    spec.family_cache.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(spec.family_cache / ".lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:  # a long wait must not look like a hang
        print(f"[jitkernels] waiting for another process to finish building {spec.name} "
              f"(lock {lock.lock_file})", file=sys.stderr, flush=True)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def _load_library(spec: _Spec) -> None:
    """Load the family's library, building it first if the cache lacks a whole copy."""
    if spec.namespace in _loaded_namespaces:
        return
    if _load_cached(spec):  # warm path: no lock, no subprocess
        return
    try:
        with _family_lock(spec):
            if not _load_cached(spec):  # another process may have built it while we waited
                _build(spec)
    except OSError as exc:
        error = _cache_write_error(exc, spec)
        if error is None:
            raise
        raise error from None


# ---------------------------------------------------------------- binding

_autograd_libraries: dict[str, "torch.library.Library"] = {}  # kept alive: a freed Library unregisters


def register_autograd(qualname: str, backward, *, setup_context) -> None:
    """torch.library.register_autograd for our ops (positional arguments only), at a fraction of its
    load time. torch's builds a dataclass per op (~0.45 ms on a fresh process's first call: a fifth of
    a warm load of `fused`; ebm registers seven); this registers the same Autograd kernel without it.
    As in torch's: the forward re-dispatches below autograd with the keyset the dispatcher passed,
    setup_context sees every input with its default filled in, and backward sees needs_input_grad for
    the op's inputs only. ops.py files get it from the loader, beside NAMESPACE."""
    namespace, name = qualname.split("::")
    op = getattr(getattr(torch.ops, namespace), name).default
    arguments = op._schema.arguments
    if any(argument.kwarg_only for argument in arguments):
        raise NotImplementedError(f"{qualname} has keyword-only arguments: use torch.library.register_autograd")

    def below_autograd(keyset, args):
        with torch._C._AutoDispatchBelowAutograd():
            return op.redispatch(keyset & torch._C._after_autograd_keyset, *args)

    def forward(ctx, *inputs):
        *args, keyset = inputs  # the keyset rides last, so backward returns None for it
        output = below_autograd(keyset, args)
        setup_context(ctx=ctx, inputs=tuple(args), output=output)
        return output

    def backward_without_keyset(ctx, *grads):
        needs_input_grad = ctx.needs_input_grad
        ctx.needs_input_grad = needs_input_grad[:-1]
        try:
            grads_in = backward(ctx, *grads)
        finally:
            ctx.needs_input_grad = needs_input_grad
        return (*grads_in, None) if isinstance(grads_in, tuple) else (grads_in, None)

    function = type(f"{name}_backward", (torch.autograd.Function,),
                    {"forward": staticmethod(forward), "backward": staticmethod(backward_without_keyset)})

    def autograd_kernel(keyset, *args):
        if len(args) < len(arguments):  # the dispatcher drops trailing arguments equal to their defaults
            args += tuple(argument.default_value for argument in arguments[len(args):])
        if torch.is_grad_enabled() and torch._C._any_requires_grad(*args):
            return function.apply(*args, keyset)
        return below_autograd(keyset, args)

    library = _autograd_libraries.get(namespace)
    if library is None:
        library = _autograd_libraries[namespace] = torch.library.Library(namespace, "FRAGMENT")
    library.impl(name, autograd_kernel, "Autograd", with_keyset=True)


def _exec_module(module_name: str, path: Path, injected: dict) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update(injected)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
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
            ops_module = _exec_module(f"_jk_ops_{spec.namespace}", spec.dir / "ops.py",
                                      {"NAMESPACE": spec.namespace, "register_autograd": register_autograd})
        for op in self._op_names:
            delattr(self, op)
        names = list(getattr(ops_module, "__all__", [])) if ops_module else []
        if not names:  # no ops.py: expose the raw torch.ops overload packets
            prefix = f"{spec.namespace}::"
            names = sorted({op[len(prefix):].split(".")[0] for op in torch._C._dispatch_get_all_op_names()
                            if op.startswith(prefix)})
            source = getattr(torch.ops, spec.namespace)
        else:
            source = ops_module
        for op in names:
            setattr(self, op, getattr(source, op))
        self._op_names = names
        self.key, self.namespace, self.cuda = spec.key, spec.namespace, spec.cuda
        self.library = spec.library
        self.module, self._reference_path = ops_module, spec.dir / "reference.py"
        sys.modules.pop(f"_jk_reference_{spec.name}", None)  # a reload runs an edited reference.py anew
        self.__doc__ = (ops_module.__doc__ if ops_module else None) or f"jitkernels family {spec.name}"

    @property
    def reference(self):
        """reference.py, the family's ops in plain PyTorch (run on first use: loads need not pay it)."""
        path = getattr(self, "_reference_path", None)
        if path is None or not path.is_file():
            return None
        module = sys.modules.get(f"_jk_reference_{self.name}")
        if module is None:
            module = _exec_module(f"_jk_reference_{self.name}", path, {})
        return module

    @property
    def ops(self):
        """The raw `torch.ops` namespace of the current build."""
        return getattr(torch.ops, self.namespace)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._op_names))

    def __repr__(self):
        halves = "C++ + CUDA" if self.cuda else "C++"
        return f"<jitkernels family {self.name!r} ({halves}), ops: {', '.join(self._op_names)}>"


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


def reload(name: str, root: str | os.PathLike | None = None) -> Family:
    """Rebuild `name` if any input of its build changed and rebind the same family object."""
    with _process_lock:
        base = kernels_root(root)
        family = _families.get(f"{base}::{name}")
        if family is None:
            return load(name, root)
        spec = _Spec(name, base)
        if spec.key != family.key:
            _load_library(spec)
        family._bind(spec)
        return family


def __getattr__(name: str) -> Family:
    """`loader.fused` is `loader.load("fused")`."""
    if not name.startswith("_") and name in families():
        return load(name)
    raise AttributeError(f"module 'loader' has no attribute {name!r} (families: {', '.join(families())})")


def __dir__():
    return sorted(set(globals()) | set(families()))


# ---------------------------------------------------------------- CLI

def info() -> dict:
    """What builds here: versions, compilers, archs, cache folder."""
    home = _cuda_home()
    return {
        "torch": torch.__version__, "torch_cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "cuda_home": str(home) if home else None,
        "nvcc": _nvcc_version(home) if home else None,
        "cxx": _compiler(), "python": sys.version.split()[0],
        "cuda_half": _env_flag("JITKERNELS_CUDA") if _env_flag("JITKERNELS_CUDA") is not None
        else torch.version.cuda is not None and torch.cuda.is_available(),
        "cuda_archs": _cuda_arch_list(), "kernels_root": str(kernels_root()), "cache": str(cache_dir()),
    }


def _cli_list(args) -> int:
    for name in families(args.root):
        spec = _Spec(name, kernels_root(args.root))
        if spec.cached_build_complete():
            state = f"cached  {spec.library.stat().st_size / 1e6:6.2f} MB"
        else:
            state = "not built"
        print(f"{name:12s} {spec.halves():24s} key {spec.key[:12]}  {state}")
    return 0


def _cli_build(args) -> int:
    if args.cuda is not None:
        os.environ["JITKERNELS_CUDA"] = "1" if args.cuda else "0"
    names = families(args.root) if args.all or not args.names else args.names
    failed = 0
    for name in names:
        try:
            spec = _Spec(name, kernels_root(args.root))
            was_cached = spec.cached_build_complete()
            load(name, args.root)
            steps = "" if was_cached else "  " + json.dumps(
                json.loads((spec.out_dir / MANIFEST).read_text())["step_seconds"])
            print(f"{name:12s} {spec.halves():24s} {'cached' if was_cached else 'built'}{steps}")
        except (BuildError, ValueError) as exc:
            failed += 1
            print(f"{name:12s} FAILED: {exc}", file=sys.stderr)
    return 1 if failed else 0


def _cli_clean(args) -> int:
    names = args.names or (sorted(p.name for p in cache_dir().iterdir()) if cache_dir().is_dir() else [])
    failed = 0
    for name in names:
        try:
            shutil.rmtree(cache_dir() / name)
        except FileNotFoundError:
            pass
        except OSError as exc:
            failed += 1
            print(f"could not remove {cache_dir() / name} ({exc.strerror}: {exc.filename}): delete it as a user "
                  f"who may write there", file=sys.stderr)
            continue
        print(f"removed {cache_dir() / name}")
    return 1 if failed else 0


def _cli_info(args) -> int:
    for key, value in info().items():
        print(f"{key:14s} {value}")
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="loader.py", description="jitkernels: build, list and clean kernel families")
    parser.add_argument("--root", help="kernels folder (default: $JITKERNELS_ROOT or the repo's kernels/)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="families, whether cached, key, library size").set_defaults(run=_cli_list)
    build = sub.add_parser("build", help="build (or load from cache) families")
    build.add_argument("names", nargs="*")
    build.add_argument("--all", action="store_true", help="every family (the default when no names are given)")
    build.add_argument("--cuda", dest="cuda", action="store_true", default=None, help="force the CUDA half on")
    build.add_argument("--no-cuda", dest="cuda", action="store_false", help="build the C++ half only")
    build.set_defaults(run=_cli_build)
    clean = sub.add_parser("clean", help="delete cached builds")
    clean.add_argument("names", nargs="*")
    clean.set_defaults(run=_cli_clean)
    sub.add_parser("info", help="torch, CUDA, nvcc, compiler, archs, cache folder").set_defaults(run=_cli_info)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    import loader  # run the CLI on the importable module, so ops.py files see one loader

    sys.exit(loader.main())
