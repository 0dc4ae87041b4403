"""benchmarks/run.py on the CPU: a case's row (ours, eager, the floor) and the Markdown it renders.
The GPU-only timings (clean L2, loop) are exercised through the table they feed."""
import dataclasses
import sys

import pytest
import torch

from benchmarks import cases_fused, run


def test_run_case_times_ours_and_eager_against_the_floor():
    case = dataclasses.replace(cases_fused.cases("cpu", small=True)[0], compile=False)  # no inductor build
    row = run.run_case(case, "cpu", floor_rate=10.0)
    assert row["ours_us"] > 0 and row["eager_us"] > 0
    assert row["floor_us"] == pytest.approx(case.bytes / 10e9 * 1e6)
    assert row["of_floor"] == pytest.approx(row["floor_us"] / row["ours_us"])
    assert row["vs_eager"] == pytest.approx(row["eager_us"] / row["ours_us"])
    assert "compile_us" not in row and "ours_clean_us" not in row and "ours_loop_us" not in row


def test_markdown_shows_both_floor_readings_and_the_loop_table():
    env = {"device": "GPU", "torch": "t", "cuda": "c", "nvcc": "n", "python": "p", "date": "d", "copy_rate_gbps": 1e3}
    rows = [{"family": "fused", "op": "relu_add", "shape": "2^26", "dtype": "float32", "ours_us": 200.0,
             "of_floor": 0.8, "of_floor_clean": 0.97, "vs_compile_clean": 1.25},
            {"family": "sampling", "op": "normal", "shape": "n=1024 d=10", "dtype": "float32", "ours_us": 5.0,
             "ours_loop_us": 13.0, "eager_loop_us": 39.0, "compile_loop_us": 65.0, "vs_eager_loop": 3.0,
             "vs_compile_loop": 5.0}]
    table = run.markdown(env, rows)
    relu_add = next(line for line in table.splitlines() if line.startswith("| fused"))
    assert "| 80 |" in relu_add and "| 97 | 1.25 |" in relu_add
    loop_rows = table.split("Launch-bound cases")[1].splitlines()
    assert "| sampling | normal | n=1024 d=10 | float32 | 13.0 | 39.0 | 65.0 | 3.00 | 5.00 |" in loop_rows
    assert "Launch-bound cases" not in run.markdown(env, rows[:1])


def test_progress_line_shows_unmeasured_percentages_as_a_dash(monkeypatch, capsys, tmp_path):
    """The line printed per case gave "clean-L2 floor%    0" on the CPU (never measured there) and "floor% 0"
    for cases without a byte count, as if measured; the Markdown table shows "–" for both."""
    row = {"family": "linalg", "op": "Shampoo step vs Adam", "shape": "MLP", "dtype": "float32", "ours_us": 10.0,
           "eager_us": 20.0, "vs_eager": 2.0, "note": ""}
    monkeypatch.setattr(run, "copy_rate_gbps", lambda device: 10.0)
    monkeypatch.setattr(run, "run_case", lambda case, device, rate: dict(row))
    monkeypatch.setattr(sys, "argv", ["run.py", "--device", "cpu", "--families", "fused", "--match", "relu_add float32",
                                      "--out", str(tmp_path)])
    assert run.main() == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("linalg"))
    assert "floor% – copy% – clean-L2 floor% –" in " ".join(line.split()), line


def test_cem_update_case_runs_the_elite_count_its_row_names():
    """The cem_update case's lambdas read n_elite from cases()'s scope, which the cem_iteration case below
    rebinds: the row said elite=6554 (bytes counted for 6554 rows) while ours and the reference both ran
    with cem_iteration's 410 (small sizes: 200 named, 50 run)."""
    import re

    import loader
    from benchmarks import cases_sampling

    case = next(c for c in cases_sampling.cases("cpu", small=True) if c.op == "cem_update")
    n, d, n_elite = map(int, re.match(r"n=(\d+) d=(\d+) elite=(\d+)", case.shape).groups())
    samples, scores, mean, std = case.args
    expected = loader.sampling.reference.cem_update(samples, scores, n_elite, mean, std, 0.1, 0.01)
    for fn in (case.ours, case.reference):
        for got, want in zip(fn(*case.args), expected):
            assert torch.allclose(got, want, rtol=1e-5, atol=1e-6)
    assert case.bytes == n * 4 + n_elite * d * 4 + 4 * d * 4
