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
