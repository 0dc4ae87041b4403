"""The loader under stress: many processes on an empty cache, builders killed at random
moments, a read-only cache, a full disk, two checkouts sharing one cache, a damaged library.

Every child runs under a timeout, so a hang fails the test instead of hanging CI. Scratch
families (C++ half only) keep it fast; the variant over the repo's own families runs only
with JITKERNELS_STRESS_REAL=1 (meant for the GPU machine)."""
import ctypes
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import loader_build

from test_loader import LOAD_AND_CHECK, REPO, SCRATCH_CPP, make_scratch_root, run_python

pytestmark = pytest.mark.slow  # about 2 minutes in all on a 2-core machine

TIMEOUT = 300  # seconds for one child; far above a scratch build, so only a hang reaches it
REAL = os.environ.get("JITKERNELS_STRESS_REAL") == "1"
BUILT = "(C++) done in"  # the progress line of a finished build: one per compile


def child_env(root: Path, cache: Path, cuda: str | None = "0") -> dict:
    env = dict(os.environ, JITKERNELS_ROOT=str(root), JITKERNELS_CACHE=str(cache), PYTHONPATH=str(REPO))
    env.pop("JITKERNELS_CUDA", None)
    return env if cuda is None else dict(env, JITKERNELS_CUDA=cuda)


def start(code: str, env: dict, *args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def finish(procs: list[subprocess.Popen], timeout: float) -> list[tuple[str, str]]:
    """Outputs of all children; any still running at the deadline is killed and fails the test."""
    deadline = time.time() + timeout
    outputs = []
    for proc in procs:
        try:
            outputs.append(proc.communicate(timeout=max(1.0, deadline - time.time())))
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            pytest.fail(f"a loader process hung for more than {timeout}s")
    return outputs


def published_builds(cache: Path) -> list[Path]:
    """Every published build folder, after checking that its library is the one its manifest records."""
    folders = []
    for manifest_path in cache.glob("*/*/manifest.json"):
        manifest = json.loads(manifest_path.read_text())
        library = manifest_path.parent / f"{manifest['namespace']}.so"
        assert hashlib.sha256(library.read_bytes()).hexdigest() == manifest["library_sha256"], library
        folders.append(manifest_path.parent)
    return folders


def error_line(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in result.stdout.splitlines() if line.startswith("ERROR ")]
    assert lines, f"no error was raised\n{result.stdout}\n{result.stderr}"
    return lines[0][len("ERROR "):]


LOAD_OR_ERROR = """
    import torch, loader
    try:
        f = loader.load("scratch")
    except loader.BuildError as exc:
        print("ERROR", str(exc).replace(chr(10), " | "))
    else:
        print("value", f.add_constant(torch.zeros(1)).item())
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A scratch root, a cache holding its build, and how long a cold and a warm load took."""
    tmp = tmp_path_factory.mktemp("built")
    root, cache = make_scratch_root(tmp), tmp / "cache"
    seconds = []
    for _ in ("cold", "warm"):
        start_time = time.perf_counter()
        result = run_python(LOAD_AND_CHECK, root, cache, timeout=TIMEOUT)
        assert result.returncode == 0 and "value 1.0" in result.stdout, result.stderr
        seconds.append(time.perf_counter() - start_time)
    return root, cache, seconds


# ---------------------------------------------------------------- 8 processes, empty cache

LOAD_ALL_ROTATED = """
    import sys, torch, loader
    names = loader.families()
    k = int(sys.argv[1]) % len(names)
    for name in names[k:] + names[:k]:  # each process starts elsewhere: builds overlap
        f = loader.load(name)
        if hasattr(f, "add_constant"):
            print(name, "value", f.add_constant(torch.zeros(1)).item())
        else:  # a real family: its library registered ops, and ops.py bound them
            registered = [op for op in torch._C._dispatch_get_all_op_names() if op.startswith(f.namespace + "::")]
            assert registered and f._op_names, (name, registered, f._op_names)
            print(name, "ops", len(registered))
"""


@pytest.mark.parametrize("real", [
    False,
    pytest.param(True, marks=pytest.mark.skipif(not REAL, reason="set JITKERNELS_STRESS_REAL=1 (GPU machine)")),
], ids=["scratch", "real"])
def test_eight_processes_on_an_empty_cache_build_each_family_once(tmp_path, real):
    if real:
        root, env = REPO / "kernels", child_env(REPO / "kernels", tmp_path / "cache", cuda=None)
        expected = {name: None for name in __import__("loader").families()}
        timeout = float(os.environ.get("JITKERNELS_STRESS_TIMEOUT", 1500))
    else:
        expected = {"alpha": 1.0, "beta": 2.0, "gamma": 3.0}
        for name, value in expected.items():
            root = make_scratch_root(tmp_path, value, name)
        env, timeout = child_env(root, tmp_path / "cache"), TIMEOUT
    procs = [start(LOAD_ALL_ROTATED, env, str(i)) for i in range(8)]
    outputs = finish(procs, timeout)
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err
        for name, value in expected.items():
            assert (f"{name} value {value}" if value is not None else f"{name} ops ") in out, (out, err)
    stderr = "".join(err for _, err in outputs)
    for name in expected:
        builds = [line for line in stderr.splitlines() if f"building {name} (" in line and " done in " in line]
        assert len(builds) == 1, f"{name} was not compiled exactly once:\n{stderr}"
    assert len(published_builds(tmp_path / "cache")) == len(expected)


# ---------------------------------------------------------------- SIGKILL at random moments

def build_stage(family_cache: Path, published_before: int) -> str:
    if len(list(family_cache.glob("*/manifest.json"))) > published_before:
        return "exiting after the publish"
    if list(family_cache.glob("build-*/*.so")):
        return "publishing"
    if list(family_cache.glob("build-*/build.ninja")):
        return "compiling"
    return "starting (importing torch, taking the lock)"


def test_builder_killed_at_random_moments_never_leaves_a_torn_library(tmp_path, built):
    *_, (cold_seconds, warm_seconds) = built
    root, cache = make_scratch_root(tmp_path), tmp_path / "cache"
    source = root / "scratch" / "scratch.cpp"
    rng = random.Random(20240611)
    # One kill in each fifth of the build proper: after the imports a warm load also does, before the exit.
    delays = [warm_seconds + rng.uniform(i, i + 1) * (cold_seconds - warm_seconds) / 5 for i in range(5)]
    for round_, delay in enumerate(delays):
        value = float(10 + round_)  # new source, new key: each builder starts on a cold build
        source.write_text(SCRATCH_CPP.replace("VALUE", repr(value)))
        # Only the Python process is killed: its compilers live on, as after an OOM kill.
        builder = start("import loader; loader.load('scratch')", child_env(root, cache), start_new_session=True)
        try:
            try:
                builder.wait(timeout=delay)
                moment = f"no kill at {delay:.2f}s: the builder had finished"
            except subprocess.TimeoutExpired:
                builder.send_signal(signal.SIGKILL)
                moment = f"killed at {delay:.2f}s while {build_stage(cache / 'scratch', round_)}"
            builder.communicate(timeout=TIMEOUT)
            result = run_python(LOAD_AND_CHECK, root, cache, timeout=TIMEOUT)
        finally:
            try:
                os.killpg(builder.pid, signal.SIGKILL)  # the orphaned compilers, if any
            except ProcessLookupError:
                pass
        print(moment)  # shown with -s or on failure: where in the build each kill landed
        assert result.returncode == 0, f"{moment}: {result.stderr}"
        assert f"value {value}" in result.stdout, f"{moment}: {result.stdout}"
    # one build published per round; superseded ones pruned to the newest few (BUILDS_KEPT)
    assert len(published_builds(cache)) == min(len(delays), loader_build.BUILDS_KEPT)


# ---------------------------------------------------------------- read-only cache

def _without_root_powers():
    """In the child before exec: drop the capabilities that let root ignore file permissions."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2, 3):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP: gone after exec
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def make_read_only(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)


def run_read_only(code: str, root: Path, cache: Path) -> subprocess.CompletedProcess:
    """Run `code` where `cache` is really read-only (as root too), checking first that it is."""
    probe = f"""
        import pathlib
        try:
            (pathlib.Path({str(cache)!r}) / "probe").mkdir()
        except PermissionError:
            pass
        else:
            raise SystemExit("WRITABLE")
    """
    preexec = _without_root_powers if os.geteuid() == 0 else None
    try:
        result = run_python(textwrap.dedent(probe) + textwrap.dedent(code), root, cache, timeout=TIMEOUT, preexec_fn=preexec)
    except subprocess.SubprocessError as exc:  # prctl refused (no CAP_SETPCAP)
        pytest.skip(f"cannot make a folder read-only for this user: {exc}")
    if "WRITABLE" in result.stderr:
        pytest.skip("this user can write into a read-only folder")
    return result


def test_read_only_cache_loads_warm_and_says_what_to_do_when_cold(tmp_path, built):
    root, built_cache, _ = built
    cache = tmp_path / "cache"
    shutil.copytree(built_cache, cache)
    make_read_only(cache)
    cold = make_scratch_root(tmp_path / "other", value=5.0)  # other source: not in the cache
    try:
        warm = run_read_only(LOAD_AND_CHECK, root, cache)
        assert warm.returncode == 0, warm.stderr
        assert "value 1.0" in warm.stdout and warm.stderr == ""
        failed = run_read_only(LOAD_OR_ERROR, cold, cache)
        cleaned = run_read_only('import loader; raise SystemExit(loader.main(["clean", "scratch"]))', root, cache)
    finally:
        for path in [cache, *cache.rglob("*")]:
            path.chmod(0o755)
    message = error_line(failed)
    assert str(cache) in message and "set JITKERNELS_CACHE to a writable folder" in message, message
    assert " | " not in message and message.endswith("."), f"not one sentence: {message}"
    assert cleaned.returncode == 1 and "could not remove" in cleaned.stderr, cleaned.stderr  # not "removed"


def test_cache_under_a_regular_file_says_what_to_do(tmp_path):
    # mkdir fails there for every user, root included: the same error as a read-only folder.
    (tmp_path / "not_a_folder").write_text("")
    cache = tmp_path / "not_a_folder" / "cache"
    result = run_python(LOAD_OR_ERROR, make_scratch_root(tmp_path), cache, timeout=TIMEOUT)
    message = error_line(result)
    assert str(cache) in message and "set JITKERNELS_CACHE to a writable folder" in message, message
    assert " | " not in message and message.endswith("."), f"not one sentence: {message}"


# ---------------------------------------------------------------- full disk

# Writes over FILE_LIMIT bytes fail with EFBIG (SIGXFSZ ignored), like a disk that is full.
FILE_LIMIT = 20_000  # below the object file and the library of a scratch family
LIMIT_AT_START = """
    import resource, signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_BYTES, MAX_BYTES))
"""
LIMIT_AFTER_COMPILE = """
    import resource, signal
    import torch.utils.cpp_extension as ce
    compile_only = ce.load
    def load_then_fill_the_disk(*args, **kwargs):
        compile_only(*args, **kwargs)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_BYTES, MAX_BYTES))
    ce.load = load_then_fill_the_disk
"""


@pytest.mark.parametrize("when", ["compiling", "publishing"])
def test_full_disk_during_a_build_says_what_to_do_and_publishes_nothing(tmp_path, when):
    root, cache = make_scratch_root(tmp_path), tmp_path / "cache"
    limit = LIMIT_AT_START if when == "compiling" else LIMIT_AFTER_COMPILE
    failed = run_python(textwrap.dedent(limit.replace("MAX_BYTES", str(FILE_LIMIT))) + textwrap.dedent(LOAD_OR_ERROR), root, cache,
                        timeout=TIMEOUT)
    message = error_line(failed)
    assert any(what in message for what in ("File too large", "File size limit exceeded")), message
    assert "while writing " + str(cache) in message, message
    assert "free space under" in message and "set JITKERNELS_CACHE to a folder with room" in message, message
    assert published_builds(cache) == []
    assert not list((cache / "scratch").glob("build-*/")), "the failed build left its files on the full disk"
    again = run_python(LOAD_AND_CHECK, root, cache, timeout=TIMEOUT)
    assert again.returncode == 0, again.stderr
    assert "value 1.0" in again.stdout and BUILT in again.stderr  # built anew, nothing half-written reused
    assert len(published_builds(cache)) == 1


# ---------------------------------------------------------------- two checkouts, one cache

def test_two_checkouts_share_one_cache_without_rebuild_ping_pong(tmp_path):
    cache = tmp_path / "cache"
    roots = {1.0: make_scratch_root(tmp_path / "checkout_a", 1.0), 2.0: make_scratch_root(tmp_path / "checkout_b", 2.0)}
    at_once = {value: start(LOAD_AND_CHECK, child_env(root, cache)) for value, root in roots.items()}
    for (value, proc), (out, err) in zip(at_once.items(), finish(list(at_once.values()), TIMEOUT)):
        assert proc.returncode == 0 and f"value {value}" in out, err
        assert err.count(BUILT) == 1  # each checkout built its own key
    for value in (1.0, 2.0, 1.0):  # in turns: both stay warm
        root = roots[value]
        result = run_python(LOAD_AND_CHECK, root, cache, timeout=TIMEOUT)
        assert result.returncode == 0 and f"value {value}" in result.stdout, result.stderr
        assert result.stderr == "", f"a warm load rebuilt or warned: {result.stderr}"
    assert len(published_builds(cache)) == 2


# ---------------------------------------------------------------- damaged library

def test_library_damaged_in_place_is_detected_and_rebuilt(tmp_path, built):
    # Same size, 4 KiB of garbage in the middle: the size check passes and dlopen accepts it
    # (the process then dies of SIGILL here), so only a checksum can tell.
    root, built_cache, _ = built
    cache = tmp_path / "cache"
    shutil.copytree(built_cache, cache)
    library = next(cache.glob("scratch/*/*.so"))
    data = library.read_bytes()
    middle = len(data) // 3
    library.write_bytes(data[:middle] + random.Random(7).randbytes(4096) + data[middle + 4096:])
    result = run_python(LOAD_AND_CHECK, root, cache, timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr
    assert "value 1.0" in result.stdout
    assert "replacing the damaged cached build" in result.stderr and BUILT in result.stderr
    assert published_builds(cache) == [library.parent]
