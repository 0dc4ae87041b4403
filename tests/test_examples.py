"""The examples stay runnable: the notebook's code cells are executed in order."""
from pathlib import Path

import json

REPO = Path(__file__).resolve().parent.parent


def test_kernel_iteration_notebook_runs(monkeypatch):
    notebook = json.loads((REPO / "examples" / "kernel_iteration.ipynb").read_text())
    monkeypatch.chdir(REPO / "examples")
    namespace = {}
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), "kernel_iteration.ipynb", "exec"), namespace)
    assert namespace["same"] is namespace["f"]
    assert not namespace["before"].equal(namespace["after"])  # the edit changed the result


def test_every_family_has_small_benchmark_cases_that_run_on_the_cpu():
    """examples/quickstart.py runs these: each family's cases at small sizes must build and run."""
    import importlib

    import loader
    for family in loader.families():
        cases = importlib.import_module(f"benchmarks.cases_{family}").cases("cpu", small=True)
        assert cases, f"{family}: no benchmark cases"
        for case in cases:
            case.ours(*case.args)


def _quickstart():
    import importlib.util

    spec = importlib.util.spec_from_file_location("quickstart", REPO / "examples" / "quickstart.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quickstart_errors_fail_on_nan_and_on_other_shapes_and_skip_only_missing_outputs():
    """Another shape or structure than the reference's was "not comparable" (None: the row showed "–" and
    passed), so a kernel returning half its output, or a tensor where a pair was due, exited 0."""
    import math

    import torch

    errors = _quickstart().errors
    reference = torch.tensor([1.0, -4.0])
    assert errors(torch.tensor([1.0, -3.0]), reference) == (1.0, 0.25)
    nan_second = errors((reference, torch.tensor([float("nan"), 0.0])), (reference, torch.zeros(2)))
    assert nan_second[0] != nan_second[0]  # a NaN in any output is kept, so its row fails
    for ours, ref in [(torch.zeros(3), reference), (reference[:1], reference), ((reference,), reference),
                      ((reference,), (reference, reference)), (reference, None)]:
        assert errors(ours, ref) == (math.inf, math.inf), (ours, ref)  # fails any tolerance
    assert errors(None, None) is None  # an optimizer step returns nothing: nothing to compare
    assert errors((reference, None), (reference, None)) == (0.0, 0.0)  # e.g. per_sample_grad_linear without bias


def test_quickstart_prints_every_case_whole_and_checks_it(device):
    """The README's first command: every family loads, every case's row carries its whole name (two
    cases once differed only past a 34-character cut), and every comparable result is within tolerance."""
    import importlib
    import os
    import subprocess
    import sys

    import loader

    # Two CPU threads: beside the other test workers, a thread per core stalled the eager CPU loops
    # (thousands of small ops, each an OpenMP region) past 300 s on the 16-core GPU host (session 38).
    env = os.environ | {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "2"}
    result = subprocess.run([sys.executable, str(REPO / "examples" / "quickstart.py"), "--device", device],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [line for line in result.stdout.splitlines() if f" {device} " in line]
    for family in loader.families():
        for case in importlib.import_module(f"benchmarks.cases_{family}").cases(device, small=True):
            name = f"{family}.{case.op} {case.shape}"
            matching = [row for row in rows if row.startswith(name + " ") and f" {case.dtype} " in row]
            assert len(matching) == 1, f"{name} ({case.dtype}): {len(matching)} rows\n{result.stdout}"
            comparable = case.reference is not None and not case.random and " – " not in matching[0]
            assert (" ok " in matching[0]) == comparable, matching[0]


def test_shampoo_mlp_time_per_step_counts_the_steps_it_times(monkeypatch, capsys):
    """shampoo_mlp.py's ms/step divided the time from step k's end to the last step's end (n - 1 - k
    steps) by n - k: every figure it printed was short by one step in n - k (0.4% at its CPU defaults)."""
    import importlib.util
    import itertools
    import types

    import torch

    spec = importlib.util.spec_from_file_location("shampoo_mlp", REPO / "examples" / "shampoo_mlp.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    clock = itertools.count()  # each read one second later: every step takes 1 s
    monkeypatch.setattr(module, "time", types.SimpleNamespace(perf_counter=lambda: float(next(clock))))
    x, y = torch.randn(16, 4), torch.randn(16, 8)
    module.train("sgd", lambda p: torch.optim.SGD(p, lr=0.0), x, y, types.SimpleNamespace(width=8, steps=10, batch=4))
    assert "1000.00 ms/step" in capsys.readouterr().out
