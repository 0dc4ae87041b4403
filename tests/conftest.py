"""Shared test fixtures: the devices to run on, and seeded randomness."""
import math
import os
import time

import pytest
import torch

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
# CUDA graphs need PyTorch's caching allocator, which tools/sanitize.sh turns off (so memcheck
# sees each tensor's true bounds): tests capture graphs only where they work.
GRAPHS_WORK = os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") != "1"
needs_graphs = pytest.mark.skipif(not GRAPHS_WORK, reason="CUDA graphs need the caching allocator")
# Ops on a second GPU while the current device is the first (cuda_host.h's DeviceSwitch, the per-device caches
# of cuda_launch.cuh and the launchers, the default generator of the tensor's device).
needs_two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")


def on_two_gpus(fn, *args, seed=0):
    """(fn on cuda:0, fn on cuda:1), both on the CPU, for args given on the CPU (tensors are moved; other args
    pass as they are). The cuda:1 call runs while the current device is 0 and cuda:1's current stream is a side
    stream that has just (re)written the arguments behind a ~50 ms sleep, so a kernel launched on another
    stream or device reads the stale contents (NaN, or -1 for integer tensors) or fails. Before each call
    torch.manual_seed(seed); before the cuda:1 call cuda:0's default generator is also moved on, so an op that
    drew from it instead of cuda:1's draws other numbers."""
    def place(device):
        return [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]

    def to_cpu(out):
        return tuple(o.cpu() if isinstance(o, torch.Tensor) else o for o in out) if isinstance(out, tuple) \
            else out.cpu()

    torch.manual_seed(seed)
    want = to_cpu(fn(*place("cuda:0")))
    second = torch.device("cuda:1")
    real = place(second)
    stale = [torch.full_like(a, float("nan") if a.is_floating_point() else -1) if isinstance(a, torch.Tensor) else a
             for a in real]
    side = torch.cuda.Stream(device=second)
    side.wait_stream(torch.cuda.current_stream(second))
    torch.manual_seed(seed)
    torch.randn(16, device="cuda:0")  # cuda:0's generator moves on; cuda:1's stays at the seed
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)
        for s, r in zip(stale, real):
            if isinstance(s, torch.Tensor):
                s.copy_(r)
        with torch.cuda.device(0):
            got = fn(*stale)
            assert torch.cuda.current_device() == 0, "the op left another device current"
    torch.cuda.synchronize(second)
    got_device = got[0].device if isinstance(got, tuple) else got.device
    assert got_device == second, f"the result is on {got_device}, not on the inputs' device"
    return want, to_cpu(got)

def min_cpu_seconds(fn, repeats=7):
    """The least CPU time of `repeats` calls of fn() (after one warm-up) on this thread, torch held to one
    thread: for tests that compare two costs of the same op (a scaling ratio, not a wall-clock bar), which
    other processes' load barely moves."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fn()
        best = math.inf
        for _ in range(repeats):
            start = time.thread_time()
            fn()
            best = min(best, time.thread_time() - start)
        return best
    finally:
        torch.set_num_threads(threads)


# Tolerances for comparing against reference.py (atol, rtol) by dtype.
TOLERANCES = {
    torch.float64: (1e-10, 1e-10),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
}


def rerun_tests(files: list[str], selection: str, env_extra: dict, before: str = "", timeout: int = 1200) -> None:
    """Run tests/<files> filtered by `-k selection` again in a fresh process with env_extra set and the
    Python code `before` run first (say, to change loader's flags), and assert that they all pass: for
    CPU code paths this machine would not take by itself."""
    import subprocess
    import sys

    import loader

    script = f"import sys\n{before}\nimport pytest\nsys.exit(pytest.main(sys.argv[1:]))\n"
    tests = [str(loader.REPO / "tests" / name) for name in files]
    command = [sys.executable, "-c", script, "-q", "-p", "no:cacheprovider", *tests, "-k", selection]
    result = subprocess.run(command, cwd=loader.REPO, env=os.environ | env_extra, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0 and " passed" in result.stdout, result.stdout[-3000:] + result.stderr[-2000:]


def registered_ops(family: str) -> set[str]:
    """The qualified names (namespace::op) of every op that the family's loaded build registered."""
    import loader

    prefix = f"{loader.load(family).namespace}::"
    return {name for name in torch._C._dispatch_get_all_op_names() if name.startswith(prefix)}


def check_dynamic_batch(fn, make_args, sizes=(5, 8, 17)):
    """fn(*make_args(B)) for several batch sizes B under torch.compile(dynamic=True, fullgraph=True) and
    torch.export with B a dynamic dimension: one graph for every B, and the results of eager calls (the
    random ops reseeded alike). Our ops' shape rules are C++ run on fake tensors; one that reads a size
    as an int (sizes(), size(i)) pins it to the traced value, so each new batch size compiled again (and
    after eight, torch.compile gave up and ran eager) and torch.export refused a dynamic batch: session 30.
    make_args(B) gives the arguments; a tensor's dimension 0 is the batch where its size follows B."""
    from torch._dynamo.utils import counters

    def seeded(f, args):
        torch.manual_seed(0)
        return f(*args)

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(fn, dynamic=True, fullgraph=True)
    for size in sizes:
        args = make_args(size)
        torch.testing.assert_close(seeded(compiled, args), seeded(fn, args))
    assert counters["stats"]["unique_graphs"] == 1, f"{counters['stats']['unique_graphs']} graphs for {len(sizes)} sizes"

    class Wrapper(torch.nn.Module):
        def forward(self, *args):
            return fn(*args)

    first, other = make_args(sizes[0]), make_args(sizes[1])
    batch = torch.export.Dim("batch", min=2)
    dynamic = tuple({0: batch} if isinstance(a, torch.Tensor) and a.dim() and a.shape[0] != b.shape[0] else None
                    for a, b in zip(first, other))
    assert any(d is not None for d in dynamic), "no argument follows the batch size"
    program = torch.export.export(Wrapper(), first, dynamic_shapes=(dynamic,))
    args = make_args(sizes[-1])
    torch.testing.assert_close(seeded(program.module(), args), seeded(fn, args))


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _families_named_in(paths: list[str]) -> set[str]:
    """The families that the test files under `paths` name (loader.load("x") or loader.x)."""
    import re
    from pathlib import Path

    import loader

    known = set(loader.families())
    files = [f for p in map(Path, paths) for f in ([p] if p.is_file() else p.rglob("test_*.py"))]
    named = set()
    for file in files:
        named |= set(re.findall(r'loader\.(?:load\(")?(\w+)', file.read_text())) & known
    return named


def pytest_sessionstart(session):
    """Test modules load their families when collected, one after another: build the ones the selected
    files need side by side first (loader.prebuild: only on machines with 8 or more CPUs)."""
    if hasattr(session.config, "workerinput"):  # a pytest-xdist worker: the controller did it
        return
    import loader

    paths = [arg.split("::")[0] for arg in session.config.args]
    loader.prebuild(sorted(_families_named_in([p for p in paths if os.path.exists(p)])))


def pytest_terminal_summary(terminalreporter):
    """test_bad_input.py counts the cases it tried: say how many."""
    import sys
    module = sys.modules.get("test_bad_input")
    if module is not None and module.CASES_RUN:
        ops = len({op for op, _ in module.CASES_RUN})
        terminalreporter.write_line(f"bad-input sweep: {len(module.CASES_RUN)} cases over {ops} ops, "
                                    "the process survived all of them")


# tools/sanitize.sh splits the suite over several processes: JK_TEST_SHARD="i/n" keeps the i-th of n
# shares of the selected tests, and JK_TEST_TIMES=path appends each test's seconds as it finishes, so a
# run cut off by a timeout still shows where its time went. With JK_TEST_BALANCE=<an earlier
# JK_TEST_TIMES log>, the shares are balanced by those times, longest test first (each goes to the
# share with the least time so far, and each share runs its longest tests first, so no long test
# starts near the end); without it, every n-th test.
@pytest.hookimpl(trylast=True)  # after -k / -m have deselected
def pytest_collection_modifyitems(config, items):
    shard = os.environ.get("JK_TEST_SHARD")
    if not shard:
        return
    index, count = (int(part) for part in shard.split("/"))
    balance = os.environ.get("JK_TEST_BALANCE")  # empty: not balanced
    if balance:
        known = {}
        with open(balance) as log:
            for line in log:
                seconds, _, nodeid = line.split()[:3]
                known[nodeid] = float(seconds)
        unknown = sorted(known.values())[len(known) // 2] if known else 1.0  # a new test: the median
        seconds = [known.get(item.nodeid, unknown) for item in items]
        order = sorted(range(len(items)), key=lambda i: -seconds[i])  # stable: every process agrees
        loads, kept = [0.0] * count, []
        for i in order:
            share = loads.index(min(loads))
            loads[share] += seconds[i]
            if share == index:
                kept.append(items[i])
    else:
        kept = items[index::count]
    kept_ids = {id(item) for item in kept}
    config.hook.pytest_deselected(items=[item for item in items if id(item) not in kept_ids])
    items[:] = kept


_phases = {}  # nodeid -> {phase: seconds}, for JK_TEST_TIMES


def pytest_runtest_logreport(report):
    path = os.environ.get("JK_TEST_TIMES")
    if not path:
        return
    phases = _phases.setdefault(report.nodeid, {"outcome": "passed"})
    phases[report.when] = report.duration
    if report.failed or (report.skipped and report.when != "teardown"):
        phases["outcome"] = report.outcome
    if report.when == "teardown":  # setup + call + teardown: fixtures can cost more than the test
        phases = _phases.pop(report.nodeid)
        total = sum(phases.get(when, 0.0) for when in ("setup", "call", "teardown"))
        with open(path, "a") as log:
            log.write(f"{total:8.2f} {phases['outcome']:7} {report.nodeid} (setup {phases.get('setup', 0):.2f} s)\n")
