"""tools/sanitize_summary.py decides whether a compute-sanitizer run was clean: check its verdicts on
logs written the way the tool and pytest -v write them."""
import importlib.util
from pathlib import Path

import pytest

_path = Path(__file__).resolve().parent.parent / "tools" / "sanitize_summary.py"
_spec = importlib.util.spec_from_file_location("sanitize_summary", _path)
summary = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(summary)

OURS_REPORT = """tests/test_x.py::test_a[cuda] ========= Invalid __global__ read of size 4 bytes
=========     at void ebm::score_kernel<float>(const float *, long)+0x1f0
=========     by thread (3,0,0) in block (0,0,0)
=========     Address 0x7f00 is out of bounds
=========
PASSED
"""
TORCH_REPORT = """tests/test_x.py::test_b[cuda] ========= Uninitialized __global__ memory read of size 8 bytes
=========     at void at::native::reduce_kernel<(int)256, (int)2, at::native::ReduceOp<double>>(T3)+0x10880
=========     by thread (1,0,0) in block (1,10,0)
=========
PASSED
"""
RACE_REPORT = """tests/test_x.py::test_c[cuda] ========= Error: Race reported between Write access at void linalg::(anonymous namespace)::tile_kernel<float>(float *)+0x80
=========     and Read access at void linalg::(anonymous namespace)::tile_kernel<float>(float *)+0x90 [128 hazards]
PASSED
"""
TOOL_FAILURE = "...========= Internal Sanitizer Error: The Sanitizer failed to handle a hardware exception.\n"
END = "========= ERROR SUMMARY: {} errors\n"


def verdict(tmp_path, shards, times="    0.50 passed  tests/test_x.py::test_a[cuda] (setup 0.00 s)\n"):
    (tmp_path / "times.log").write_text(times)
    logs = []
    for i, text in enumerate(shards):
        logs.append(tmp_path / f"shard_{i}.log")
        logs[-1].write_text(text)
    return summary.main("memcheck", "1", str(tmp_path / "times.log"), *map(str, logs))


def test_clean_run_passes(tmp_path, capsys):
    assert verdict(tmp_path, ["tests/test_x.py::test_a[cuda] PASSED\n" + END.format(0)]) == 0
    assert "CLEAN" in capsys.readouterr().out


def test_a_report_in_our_kernel_fails_and_names_kernel_and_test(tmp_path, capsys):
    assert verdict(tmp_path, [OURS_REPORT + END.format(1)]) == 1
    out = capsys.readouterr().out
    assert "ebm::score_kernel: Invalid __global__ read" in out and "tests/test_x.py::test_a[cuda]" in out


def test_racecheck_hazards_in_anonymous_namespaces_count_as_ours(tmp_path, capsys):
    assert verdict(tmp_path, [RACE_REPORT + END.format(1)]) == 1
    assert "linalg::" in capsys.readouterr().out


def test_another_librarys_report_is_counted_but_does_not_fail(tmp_path, capsys):
    assert verdict(tmp_path, [TORCH_REPORT + END.format(1)]) == 0
    assert "other libraries: 1 x at::native::reduce_kernel" in capsys.readouterr().out


CRASH = """tests/test_x.py::test_a[cuda] Fatal Python error: Segmentation fault
========= Error: process didn't terminate successfully
========= Target application returned an error
"""


@pytest.mark.parametrize("case", ["tool failure", "cut off", "failed test", "nothing ran", "all skipped", "crash"])
def test_runs_that_prove_nothing_fail(tmp_path, case):
    shards = {"tool failure": [TOOL_FAILURE + END.format(0)],
              "cut off": ["tests/test_x.py::test_a[cuda] PASSED\n" + END.format(0), "tests/test_x.py::test_b[cuda] "],
              "failed test": [END.format(0)], "nothing ran": [END.format(0)], "all skipped": [END.format(0)],
              "crash": [CRASH + END.format(0)]}[case]
    times = {"failed test": "  300.00 failed  tests/test_x.py::test_a[cuda] (setup 0.00 s)\n", "nothing ran": "",
             "all skipped": "    0.00 skipped tests/test_x.py::test_a[cuda] (setup 0.00 s)\n"}
    assert verdict(tmp_path, shards, **({"times": times[case]} if case in times else {})) == 1


def test_pytests_closing_line_is_not_a_report(tmp_path):
    """pytest centres its summary in '=' signs: with many deselected tests, 9 of them, as the tool's."""
    closing = "========= 148 passed, 12 skipped, 1928 deselected in 225.52s (0:03:45) =========\n"
    assert verdict(tmp_path, ["tests/test_x.py::test_a[cuda] PASSED\n" + closing + END.format(0)]) == 0
    assert verdict(tmp_path, [OURS_REPORT + closing + END.format(1)]) == 1


_coverage_path = _path.parent / "sanitize_coverage.py"
_coverage_spec = importlib.util.spec_from_file_location("sanitize_coverage", _coverage_path)
coverage = importlib.util.module_from_spec(_coverage_spec)
_coverage_spec.loader.exec_module(coverage)


def write_run(folder, tool, lines):
    folder.mkdir(exist_ok=True)
    (folder / f"sanitize_{tool}_times.log").write_text(
        "".join(f"    1.00 {outcome:7} {test} (setup 0.00 s)\n" for outcome, test in lines))
    return str(folder)


def test_coverage_counts_passes_over_runs_and_drops_stale_ones(tmp_path, capsys):
    old = write_run(tmp_path / "old", "memcheck", [("passed", "t.py::ebm_a"), ("passed", "t.py::fused_b"),
                                                   ("failed", "t.py::fused_c")])
    new = write_run(tmp_path / "new", "memcheck", [("passed", "t.py::fused_c")])
    assert coverage.passed("memcheck", [old, new]) == {"t.py::ebm_a", "t.py::fused_b", "t.py::fused_c"}
    # ebm's kernels changed after the old run: its pass of ebm_a no longer counts
    assert coverage.passed("memcheck", [old + ":ebm", new]) == {"t.py::fused_b", "t.py::fused_c"}
    assert coverage.passed("racecheck", [old, new]) == set()
    assert coverage.main("report", old + ":ebm", new) == 1  # ebm_a missing under memcheck, all under the others
    assert "missing: t.py::ebm_a" in capsys.readouterr().out
    for tool in coverage.TOOLS:
        write_run(tmp_path / "all", tool, [("passed", t) for t in ("t.py::ebm_a", "t.py::fused_b", "t.py::fused_c")])
    assert coverage.main("report", old, new, str(tmp_path / "all")) == 0
    assert "memcheck: 3 of 3 tests passed" in capsys.readouterr().out


FAKE_RES_USAGE = """ Function _Z6staticPf:
  REG:16 STACK:0 SHARED:1024 LOCAL:0 CONSTANT[0]:368
 Function _Z7dynamicPf:
  REG:16 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:368
 Function _Z4nonePf:
  REG:16 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:368
 Function _Z4bothPf:
  REG:16 STACK:0 SHARED:64 LOCAL:0 CONSTANT[0]:368
"""
FAKE_SASS = """\t\tFunction : _Z7dynamicPf
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/               @P0 STS [R7], R0 ;
\t\tFunction : _Z4nonePf
        /*0000*/                   LDG.E R0, desc[UR4][R2.64] ;
        /*0010*/              @!P1 STG.E desc[UR4][R2.64], R0 ;
        /*0020*/                   LD.E R3, [R4] ;
\t\tFunction : _Z4bothPf
        /*0000*/                   LDS R0, [R2] ;
        /*0010*/                   LDS R1, [R2+0x4] ;
"""


def test_shared_memory_audit_finds_static_and_dynamic_shared_memory(tmp_path):
    """What the audit reads from cuobjdump (a fake one here): a static SHARED size, or, for dynamic
    shared memory, a predicated shared-memory store in the SASS; global loads and stores are not."""
    (tmp_path / "res_usage.txt").write_text(FAKE_RES_USAGE)
    (tmp_path / "sass.txt").write_text(FAKE_SASS)
    tool = tmp_path / "cuobjdump"
    tool.write_text(f'#!/bin/sh\n[ "$1" = -res-usage ] && cat {tmp_path}/res_usage.txt || cat {tmp_path}/sass.txt\n')
    tool.chmod(0o755)
    found = coverage.shared_memory_kernels("lib.so", str(tool))
    assert found == {"_Z6staticPf": "1024 bytes of static shared memory",
                     "_Z7dynamicPf": "shared-memory instruction STS",
                     "_Z4bothPf": "64 bytes of static shared memory; shared-memory instruction LDS"}


def built_cuda_library(family):
    """The family's CUDA library if this machine has built it (CI compiles every CUDA half), and cuobjdump."""
    import loader

    tool = coverage.cuobjdump()
    spec = loader._Spec(family, loader.kernels_root(), cuda=True)
    if tool is None or not spec.cuda or not spec.cached_build_complete():
        pytest.skip(f"needs cuobjdump and {family}'s CUDA half built (JITKERNELS_CUDA=1 python loader.py build {family})")
    return spec.library, tool


def test_linalg_general_route_uses_no_shared_memory():
    """racecheck checks shared memory only. linalg's one test that racecheck could not finish (inverse root
    at n=4096, hours with cuBLAS's GEMMs instrumented) takes the general route, whose kernels touch no shared
    memory, and launches the same kernels as the n=1024 test that passed under it. Only the small-matrix
    kernel (n <= 64, quick under racecheck) uses shared memory; since it does, nvcc reports 1024 static bytes
    for every kernel of the module, which the others never touch. This test keeps that argument true; ebm's
    library, which does use shared memory, shows the audit sees it."""
    library, tool = built_cuda_library("linalg")
    found = coverage.shared_memory_kernels(library, tool)
    small = {kernel for kernel in found if "inverse_root_small_kernel" in kernel}
    assert small and all("instruction" in found[kernel] for kernel in small)
    assert {kernel: why for kernel, why in found.items()
            if kernel not in small and why != "1024 bytes of static shared memory"} == {}
    ebm_library, _ = built_cuda_library("ebm")
    assert any("hmc_chain_kernel" in kernel for kernel in coverage.shared_memory_kernels(ebm_library, tool))
