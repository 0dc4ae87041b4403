"""jitkernels loader, the cold half: what runs only when a family has to be built, and the CLI.

`loader.py` imports this module on a cache miss (or for the CLI), so a warm load neither reads
nor runs it (~0.35 ms of `import loader` on the dev machine, session 14). The build spec, the cache
key and the cache check stay in `loader.py`: one place for each.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

import loader
from loader import MANIFEST, BuildError, _Spec, cache_dir, families, kernels_root


def build_and_load(spec: _Spec) -> None:
    """Build the family under its file lock, unless another process built it meanwhile; load it."""
    try:
        with _family_lock(spec):
            if not loader._load_cached(spec):  # another process may have built it while we waited
                _build(spec)
    except OSError as exc:
        error = _cache_write_error(exc, spec)
        if error is None:
            raise
        raise error from None


def build_at_once(names: list[str], root: Path) -> None:
    """Build the families of `names` that the cache lacks in child processes (`loader.py build NAME`),
    several at a time: ninja already spreads one family over the cores its few files can use, so a
    machine with cores to spare builds the next families beside it instead of after it. Up to one
    family per 3 CPUs at once; with fewer than 6 CPUs nothing here (load builds each in turn).
    Outcomes are printed, not raised: load() of a family that failed builds it again and raises."""
    specs = []
    for name in names:
        with contextlib.suppress(ValueError):  # not a family: load(name) says so
            spec = _Spec(name, root)
            if not spec.cached_build_complete():
                specs.append(spec)
    # One family per 3 CPUs: since session 29's light .cu files all five families (16 files, ~150 s of compiles)
    # fit a 16-CPU GPU host at once, ready after 22.7-25.1 s, against 26.6-28.8 s one per 4 CPUs (fused, started
    # last, finished last; results/session29/call6).
    slots = (os.cpu_count() or 1) // 3
    if len(specs) < 2 or slots < 2 or not sys.executable:  # (no interpreter to start: an embedded Python)
        return
    # The biggest families first (most bytes to compile: on the GPU machine they take longest), so the last
    # one to start is a quick one: session 27's run started sampling (~20 s) last, after fused, and
    # finished at 39.4 s where ebm alone was done at 35.9 s.
    specs.sort(key=lambda spec: -sum(source.stat().st_size for source in spec.sources()))
    missing = [spec.name for spec in specs]
    print(f"[jitkernels] building {', '.join(missing)}: up to {slots} at once, one process each",
          file=sys.stderr, flush=True)
    start, waiting, running = time.perf_counter(), list(missing), {}
    try:
        while waiting or running:
            while waiting and len(running) < slots:
                name = waiting.pop(0)
                running[name] = subprocess.Popen(
                    [sys.executable, str(loader.REPO / "loader.py"), "--root", str(root), "build", name],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.1)
            for name, child in list(running.items()):
                if child.poll() is not None:
                    del running[name]
                    outcome = "built" if child.returncode == 0 else "failed (its load says why)"
                    print(f"[jitkernels] {name} {outcome} after {time.perf_counter() - start:.1f}s",
                          file=sys.stderr, flush=True)
    finally:  # interrupted: stop the builders (a killed builder leaves no lock and no torn build)
        for child in running.values():
            child.kill()
            child.wait()


def _verbose() -> bool:
    return bool(loader._env_flag("JITKERNELS_VERBOSE"))


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


# The first error line of g++ / nvcc, and of the linker.
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
            return _with_demangled_symbol(line.strip())
    # An error of no source line: a compiler killed for memory ("c++: fatal error: Killed signal terminated
    # program cc1plus"), nvcc refusing an arch ("nvcc fatal   : Unsupported gpu architecture ..."), or no
    # compiler run at all (torch's "Unknown CUDA arch (sm_90) or GPU not supported" for a mistyped
    # TORCH_CUDA_ARCH_LIST). Each was "no compiler error line found", with the reason only in the log.
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in lines:
        if re.search(r"(?i)\b(fatal|error)\s*:", line) and not line.startswith("Error building extension"):
            return line
    if lines and not lines[0].startswith("Error building extension"):
        return lines[0]
    return "build failed (no compiler error line found)"


def _with_demangled_symbol(line: str) -> str:
    """A loader's "undefined symbol: _Z6helperRKN2at6TensorE" with the C++ name (c++filt) beside it."""
    symbol = re.search(r"undefined symbol: (\S+)", line)
    demangler = shutil.which("c++filt")
    if symbol is None or demangler is None:
        return line
    name = subprocess.run([demangler, symbol[1]], capture_output=True, text=True).stdout.strip()
    return f"{line} ({name}: used, but defined in no source of the family)"


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
    if not loader._compiler():
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
    # torch guesses its CUDA_HOME once at import; make it use the toolkit found here. Not through
    # os.environ: $CUDA_HOME is part of a CUDA build's cache key (loader._nvcc_identity), and setting it
    # here changed the keys of the loads after this build in the process (and in prebuild's children).
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


def _ninja_step_seconds(build_dir: Path, since_ns: int) -> dict[str, float]:
    """Seconds per ninja step of this build (each object file compiled and the link), from ninja's own
    log, which also holds the steps of the earlier builds whose objects this one reused (outputs older
    than since_ns)."""
    steps = {}
    log = build_dir / ".ninja_log"
    if log.is_file():
        for line in log.read_text().splitlines()[1:]:
            start, end, _, output, *_ = line.split("\t")
            steps[output] = (int(end) - int(start)) / 1000
    return {output: seconds for output, seconds in steps.items()
            if (build_dir / output).is_file() and (build_dir / output).stat().st_mtime_ns >= since_ns}


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


def _message_and_causes(exc: BaseException) -> str:
    """exc's message and its causes': a library that links but does not load (a function declared and
    called, defined nowhere) is torch's "Could not load this library: <path>", with dlopen's reason
    ("undefined symbol: ...") only in the exception's __cause__, and the build said "no compiler error"."""
    messages = []
    while exc is not None and len(messages) < 8:
        messages.append(str(exc))
        exc = exc.__cause__
    return "\n".join(messages)


def _compile_error(spec: _Spec, log: str, build_dir: Path) -> BuildError:
    """The first compiler error (or the full disk that stopped the compiler), and where the full log is."""
    log_path = spec.family_cache / f"build-{spec.key[:12]}.log"
    try:
        log_path.write_text(log)
        where = f"full log: {log_path}"
        _prune_failed_logs(spec.family_cache)
    except OSError as exc:  # the disk may be the very problem
        where = f"the log could not be written to {log_path} ({exc.strerror})"
    full = next((line.strip() for line in log.splitlines() if re.search(_NO_SPACE_TEXT, line)), None)
    if full:
        return BuildError(f"{full}\nthe disk filled up while writing {build_dir} (or the temporary folder) for "
                          f"family {spec.name!r}: free space under {cache_dir()} or set JITKERNELS_CACHE to a folder "
                          f"with room, then load it again; {where}")
    return BuildError(f"{_first_compiler_error(log)}\n"
                      f"building family {spec.name!r} ({spec.halves()}) failed; {where}", in_sources=True)


# Every failed edit in a notebook writes a log; the newest few are kept.
FAILED_LOGS_KEPT = 4


def _prune_failed_logs(family_cache: Path) -> None:
    """Delete the family's failed-build logs but the FAILED_LOGS_KEPT newest."""
    def age(path: Path) -> float:
        try:
            return -path.stat().st_mtime
        except OSError:  # deleted by another process meanwhile
            return 0.0

    for path in sorted(family_cache.glob("build-*.log"), key=age)[FAILED_LOGS_KEPT:]:
        with contextlib.suppress(OSError):
            path.unlink()


def _clear_leftovers(spec: _Spec) -> None:
    """Delete build folders of builders that were killed: only lock holders build, so none is in use."""
    for path in spec.family_cache.glob("build-*"):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)


# <cache>/<family>/objects-<id>/: the last build's folder (objects, ninja's log and dependency files) for
# one config and kernels root, which the next build of them starts from, so that ninja recompiles only
# what changed. One per config and root (CPU-only and CUDA builds, the notebook's copy of a family, each
# keep their own), the most recently built few of them.
OBJECTS_RECORD = "objects.json"  # in it: the config and the source digests its objects were built from
OBJECTS_KEPT = 4
# Published builds (<cache>/<family>/<key>/) of one config and kernels root: every edit -> reload makes
# one, so the older ones are deleted once this many newer ones exist (a branch switched back and forth
# still loads warm). Builds of other configs or roots are left alone.
BUILDS_KEPT = 4


def _build(spec: _Spec) -> None:
    """Compile the family into a private folder and publish it at spec.out_dir by rename.

    Called with the family's file lock held, so no other process builds it now. A new folder per
    build, never one a killed builder's compilers may still be writing into; the last build's folder
    is renamed into it when its objects can be reused (_take_reusable_objects), so an edit of one
    source recompiles that source and an edit of ops.py alone recompiles none, only the namespace's
    one-line source (jk.h) and the link."""
    _check_toolchain(spec)
    _clear_leftovers(spec)
    _check_sources_unchanged(spec)  # before any folder is made or last build's objects are taken
    build_dir = Path(tempfile.mkdtemp(prefix=f"build-{spec.key[:12]}-", dir=spec.family_cache))
    digests = {path: loader._sha256(Path(path)) for path in spec.source_files()[1]}  # what this build reads
    _take_reusable_objects(spec, build_dir, digests)
    keep = False
    try:
        start, start_ns = time.perf_counter(), time.time_ns()
        library = _compile(spec, build_dir)
        _check_sources_unchanged(spec)
        _publish(spec, build_dir, library, time.perf_counter() - start, start_ns)
        keep = True
    except BuildError as exc:  # what did compile stays good for the next try (not on a full disk)
        keep = not re.search(_NO_SPACE_TEXT, str(exc))
        raise
    finally:  # else a failed build leaves nothing behind (on a full disk, its files are the problem)
        if keep:
            _keep_objects(spec, build_dir, digests)
        else:
            shutil.rmtree(build_dir, ignore_errors=True)


def _check_sources_unchanged(spec: _Spec) -> None:
    """The key was made from the sources as they were before this process took the lock; an edit while it
    waited or compiled would be published under the old key, and a later load of the old sources would get
    the new code (session 40's review). Checked before and after compiling: never publish a mismatch."""
    if _Spec(spec.name, spec.root, cuda=spec.cuda, reread_sources=True).key != spec.key:
        raise BuildError(f"{spec.name}'s sources changed while this build waited for the lock or compiled: "
                         f"nothing was published; load or reload again to build them as they are now")


def _take_reusable_objects(spec: _Spec, build_dir: Path, digests: dict[str, str]) -> None:
    """Move the last build's folder into the (empty) build_dir when its objects are safe to reuse: built
    with the same config (flags, torch, compilers, archs), and every source either unchanged since or
    modified after that build finished. ninja goes by modification times, so a source restored with an
    old mtime would otherwise keep its stale object; then the folder is dropped and all is compiled."""
    objects = _objects_folder(spec)
    if not objects.is_dir():
        return
    try:
        record = json.loads((objects / OBJECTS_RECORD).read_text())
        reusable = record["config"] == spec.config and not any(
            record["digests"].get(path) != digest and os.stat(path).st_mtime_ns <= record["finished_ns"]
            for path, digest in digests.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # also JSON that is not an object
        reusable = False
    if reusable:
        build_dir.rmdir()
        os.rename(objects, build_dir)
    else:
        shutil.rmtree(objects, ignore_errors=True)


def _keep_objects(spec: _Spec, build_dir: Path, digests: dict[str, str]) -> None:
    """Keep build_dir as the family's objects folder for the next build, with what it was built from."""
    try:
        for library in build_dir.glob(f"*{spec.library.suffix}"):
            library.unlink()  # maybe loaded in this process: the next link must write a new file, not into it
        (build_dir / OBJECTS_RECORD).write_text(
            json.dumps({"config": spec.config, "digests": digests, "finished_ns": time.time_ns()}))
        objects = _objects_folder(spec)
        shutil.rmtree(objects, ignore_errors=True)
        os.rename(build_dir, objects)
        for stale in _objects_folders_by_age(spec)[:-OBJECTS_KEPT]:
            shutil.rmtree(stale, ignore_errors=True)
    except OSError:
        shutil.rmtree(build_dir, ignore_errors=True)


def _objects_folders_by_age(spec: _Spec) -> list[Path]:
    """The family's objects folders, oldest build first (by the time recorded: file times are coarse)."""
    def finished_ns(folder: Path) -> int:
        try:
            return int(json.loads((folder / OBJECTS_RECORD).read_text())["finished_ns"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0
    return sorted(spec.family_cache.glob("objects-*"), key=finished_ns)


def _origin(spec: _Spec) -> str:
    """What spec's builds share across edits: its config and kernels root (sources aside), 12 hex digits."""
    identity = "\0".join((spec.config, str(spec.dir), str(spec.common)))
    return hashlib.sha256(identity.encode()).hexdigest()[:12]


def _objects_folder(spec: _Spec) -> Path:
    """The objects folder of spec's config and kernels root."""
    return spec.family_cache / f"objects-{_origin(spec)}"


def _prune_superseded_builds(spec: _Spec) -> None:
    """Delete the published builds of spec's origin but the BUILDS_KEPT most recent (spec's included).
    Called under the family lock. A process that loaded one keeps it (the mapping outlives the file),
    and one that reaches for a deleted build finds no manifest and builds it again."""
    origin, builds = _origin(spec), []
    for folder in spec.family_cache.iterdir():
        try:
            manifest = json.loads((folder / MANIFEST).read_text())
        except (OSError, ValueError):  # not a build folder, or one being deleted
            continue
        if not isinstance(manifest, dict):  # valid JSON, but not a manifest
            continue
        if manifest.get("origin") == origin and folder.name != spec.key:
            builds.append((manifest.get("published_ns", 0), folder))
    for _, folder in sorted(builds, reverse=True)[BUILDS_KEPT - 1:]:
        shutil.rmtree(folder, ignore_errors=True)


def _compile(spec: _Spec, build_dir: Path) -> Path:
    """cpp_extension.load into build_dir, which also loads the library into this process; its path."""
    cpp_extension = _cpp_extension()

    # The namespace in a source of its own (jk.h), and one extension name per family: cpp_extension puts
    # -DTORCH_EXTENSION_NAME=<name> on every compile line, and a name per key would recompile them all.
    namespace_source = write_namespace_source(build_dir, spec.namespace)
    # cpp_extension renames an extension it has built before in this process (<name>_v1, ...), and so
    # every compile line: forget the earlier builds (a private table; without it a rebuild in the same
    # process just compiles everything again).
    getattr(getattr(cpp_extension, "JIT_EXTENSION_VERSIONER", None), "entries", {}).pop(_extension_name(spec), None)
    defines = ["-DJK_WITH_CUDA"] if spec.cuda else []
    saved_arch = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if spec.cuda:
        os.environ["TORCH_CUDA_ARCH_LIST"] = spec.arch_list
    try:
        with _Progress(spec):
            cpp_extension.load(
                name=_extension_name(spec),
                sources=[str(s) for s in spec.sources()] + [str(namespace_source)],
                extra_cflags=loader.CXX_FLAGS + defines,
                extra_cuda_cflags=loader.CUDA_FLAGS + defines,
                extra_ldflags=list(loader.LINK_FLAGS),
                extra_include_paths=[str(spec.common)],
                build_directory=str(build_dir),
                verbose=_verbose(),
                with_cuda=spec.cuda,
                is_python_module=False,
            )
            # The one library in the folder (_keep_objects deleted the last build's): jk_<family>.so, or
            # jk_<family>_v<n>.so had cpp_extension renamed it after all.
            library = next(build_dir.glob(f"{_extension_name(spec)}*{spec.library.suffix}"))
            failure = _registration_error(library)
            if failure:  # loaded, but its ops are not all there: not published, its namespace not counted as loaded
                raise BuildError(f"{failure}\nregistering the ops of family {spec.name!r} ({spec.halves()}) failed "
                                 "(compiled and linked, but a registration block threw): fix it and reload",
                                 in_sources=True)
    except BuildError:
        raise
    except Exception as exc:  # the compiler's output is in the message
        if isinstance(exc, OSError) and exc.errno is not None:
            raise  # a write that failed (full disk, read-only cache): _load_library says what to do
        log = _message_and_causes(exc)
        if _verbose() and isinstance(exc, RuntimeError) and (build_dir / "build.ninja").is_file():
            # verbose, torch sends the compiler's output to file descriptor 1 (in a notebook, the server's
            # log) and not into the error, which then named no error at all: the failed steps run again
            # for it
            again = subprocess.run(["ninja", "-v"], cwd=build_dir, capture_output=True, text=True)
            log += "\n" + again.stdout + again.stderr
        raise _compile_error(spec, log, build_dir) from None
    finally:
        if saved_arch is None:
            os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = saved_arch
    loader._loaded_namespaces.add(spec.namespace)
    return library


def write_namespace_source(folder: Path, namespace: str) -> Path:
    """folder/jk_namespace.cpp: the string jk.h's JK_LIBRARY macros register the family's ops under."""
    source = folder / "jk_namespace.cpp"
    source.write_text(f"// the op namespace of this build (loader_build.write_namespace_source)\n"
                      f'extern "C" __attribute__((visibility("hidden"))) const char jk_namespace[] = "{namespace}";\n'
                      + REGISTRATION_ERROR_SOURCE)
    return source


# The first exception a registration block threw while the library loaded (jk.h's jk::detail::LibraryInit
# keeps it, instead of letting it terminate the process), for _registration_error to read. A char array,
# not a std::string: it is written during static initialization, in whatever order the files run theirs.
REGISTRATION_ERROR_SOURCE = """#include <cstdio>
static char jk_registration_error_text[8192];
extern "C" __attribute__((visibility("hidden"))) void jk_registration_failed(const char* file, unsigned line,
                                                                             const char* what) {
  while (*what == '\\n' || *what == ' ') ++what;  // a schema's parse error starts with a newline
  if (!jk_registration_error_text[0])
    std::snprintf(jk_registration_error_text, sizeof(jk_registration_error_text), "%s:%u: %s", file, line, what);
}
extern "C" __attribute__((visibility("default"))) const char* jk_registration_error() {
  return jk_registration_error_text;
}
"""


def _registration_error(library: Path) -> str | None:
    """The error a registration block of the loaded library threw (jk.h), or None."""
    import ctypes

    query = ctypes.CDLL(str(library)).jk_registration_error  # the handle of the library already loaded
    query.restype = ctypes.c_char_p
    return query().decode(errors="replace") or None


def _extension_name(spec: _Spec) -> str:
    return f"jk_{spec.name}"


def _publish(spec: _Spec, build_dir: Path, library: Path, build_seconds: float, start_ns: int) -> None:
    """Library + manifest (with its sha256) into a folder renamed to spec.out_dir in one step."""
    staging = build_dir / "publish"
    staging.mkdir()
    shutil.copy2(library, staging / spec.library.name)
    manifest = {
        "family": spec.name, "key": spec.key, "namespace": spec.namespace, "cuda": spec.cuda,
        "archs": spec.arch_list, "torch": torch.__version__,
        "library_bytes": (staging / spec.library.name).stat().st_size,
        "library_sha256": loader._sha256(staging / spec.library.name),
        "library_stat": loader._stat_identity(staging / spec.library.name),  # os.rename keeps size and mtime
        "build_seconds": round(build_seconds, 2),
        "step_seconds": _ninja_step_seconds(build_dir, start_ns),
        "origin": _origin(spec), "published_ns": time.time_ns(),  # _prune_superseded_builds
    }
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=1))
    if spec.out_dir.exists():  # published earlier but damaged since (cached_build_complete said no)
        print(f"[jitkernels] replacing the damaged cached build at {spec.out_dir}", file=sys.stderr, flush=True)
        shutil.rmtree(spec.out_dir, ignore_errors=True)
    os.rename(staging, spec.out_dir)  # atomic: readers see all of it or nothing
    _prune_superseded_builds(spec)


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


# ---------------------------------------------------------------- CLI

def info() -> dict:
    """What builds here: versions, compilers, archs, cache folder."""
    home = _cuda_home()
    cuda_half = loader._cuda_half_on()
    archs = loader._cuda_arch_list()
    return {
        "torch": torch.__version__, "torch_cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "cuda_home": str(home) if home else None,
        "nvcc": _nvcc_version(home) if home else None,
        "cxx": loader._compiler(), "python": sys.version.split()[0],
        "cuda_half": cuda_half,
        # Without a CUDA half the archs are only what a forced build (--cuda) would target: say so.
        "cuda_archs": archs if cuda_half else f"{archs} (for a forced CUDA build: --cuda or JITKERNELS_CUDA=1)",
        "kernels_root": str(kernels_root()), "cache": str(cache_dir()),
    }


def _cli_list(args) -> int:
    names = families(args.root)
    if not names:  # printed nothing and exited 0 for a mistyped JITKERNELS_ROOT
        print(f"no kernel families under {kernels_root(args.root)}", file=sys.stderr)
        return 1
    for name in names:
        spec = _Spec(name, kernels_root(args.root))
        if spec.cached_build_complete():
            state = f"cached  {spec.library.stat().st_size / 1e6:6.2f} MB"
        else:
            state = "not built"
        print(f"{name:12s} {spec.halves():24s} key {spec.key[:12]}  {state}")
    return 0


def _cached(name: str, root) -> bool:
    try:
        return _Spec(name, kernels_root(root)).cached_build_complete()
    except ValueError:  # not a family: load(name) below says so
        return False


def _cli_build(args) -> int:
    if args.cuda is not None:
        os.environ["JITKERNELS_CUDA"] = "1" if args.cuda else "0"
    names = families(args.root) if args.all or not args.names else args.names
    if not names:  # built nothing and exited 0 for a mistyped --root or JITKERNELS_ROOT, as `list` did
        print(f"no kernel families under {kernels_root(args.root)}", file=sys.stderr)
        return 1
    # What was cached before this command: build_at_once's child processes build the rest first (on a
    # machine of 6+ CPUs), and those are "built" here too (until session 41 they printed "cached").
    cached_before = {name for name in names if _cached(name, args.root)}
    build_at_once(names, kernels_root(args.root))
    failed = 0
    for name in names:
        try:
            spec = _Spec(name, kernels_root(args.root))
            was_cached = name in cached_before
            loader.load(name, args.root)
            steps = "" if was_cached else "  " + json.dumps(
                json.loads((spec.out_dir / MANIFEST).read_text())["step_seconds"])
            print(f"{name:12s} {spec.halves():24s} {'cached' if was_cached else 'built'}{steps}")
        except Exception as exc:  # noqa: BLE001 -- an ops.py that raises (ImportError, ...) fails its family only
            failed += 1
            print(f"{name:12s} FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
    return 1 if failed else 0


def _cli_clean(args) -> int:
    """Remove families' cache folders: the ones named (plain names only), else every folder of the cache
    that a build made (it holds the family's .lock). Until session 40 a name was joined to the cache path
    unchecked, so `clean /some/folder` or `clean ..` deleted folders outside the cache, and a plain `clean`
    emptied whatever JITKERNELS_CACHE pointed at. Each folder is removed under the family's build lock,
    so a build running in another process finishes (or is waited for) first."""
    from filelock import FileLock

    cache = cache_dir()
    for name in args.names:
        if name in ("", ".", "..") or os.path.basename(name) != name or os.sep in name:
            print(f"clean takes family names, not paths: {name!r}", file=sys.stderr)
            return 2
    names = args.names or (sorted(p.name for p in cache.iterdir() if (p / ".lock").is_file()) if cache.is_dir()
                           else [])
    failed = 0
    for name in names:
        folder = cache / name
        if not (folder / ".lock").is_file():
            print(f"nothing cached for {name} in {cache}")
            known = families(args.root)
            if name not in known:  # neither built nor a family: most likely a typo
                failed += 1
                print(f"{name} is not a family under {kernels_root(args.root)} either "
                      f"(families: {', '.join(known) or 'none'})", file=sys.stderr)
            continue
        try:
            with FileLock(str(folder / ".lock")):
                shutil.rmtree(folder)
        except FileNotFoundError:
            pass
        except OSError as exc:
            failed += 1
            print(f"could not remove {folder} ({exc.strerror}: {exc.filename}): delete it as a user "
                  f"who may write there", file=sys.stderr)
            continue
        print(f"removed {folder}")
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
