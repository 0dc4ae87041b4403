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
