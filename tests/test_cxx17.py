"""Every family's C++ half must compile as C++17 as well as C++20.

torch 2.11 (the GPU machine's) builds extensions with -std=c++17; newer torch (requirements.txt's) with
-std=c++20. A C++20-only construct in our sources then builds here and fails there (session 26: a
requires-expression in ebm.cpp took ebm down on the GPU machine). Newer torch's own headers are not C++17
any more, so this compiles each source with -std=c++17 and fails only on errors reported in our files.
"""
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from torch.utils import cpp_extension

import loader
import loader_build

KERNELS = loader.REPO / "kernels"
SOURCES = sorted(KERNELS.glob("*/*.cpp"))
COMPILER = shutil.which("c++") or shutil.which("g++")


def _compile_cxx17(source: Path) -> str:
    """The compiler's output for `source` as C++17, syntax only (the CUDA parts too where CUDA is here)."""
    cuda_home = loader_build._cuda_home()
    cuda = ["-DJK_WITH_CUDA", "-isystem", str(cuda_home / "include")] if cuda_home else []
    includes = [flag for path in cpp_extension.include_paths() for flag in ("-isystem", path)]
    command = [COMPILER, "-std=c++17", "-fsyntax-only", "-DTORCH_EXTENSION_NAME=jk_cxx17_check",
               *loader.CXX_FLAGS, *cuda, *includes, "-I", str(KERNELS / "common"), "-I", str(source.parent),
               str(source)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300).stderr


def _errors_in_our_files(output: str) -> list[str]:
    ours = re.escape(str(KERNELS))
    return [line for line in output.splitlines() if re.match(rf"({ours}|kernels)/\S+:\d+:\d+: error:", line)]


@pytest.mark.skipif(COMPILER is None, reason="no C++ compiler")
def test_family_sources_are_cxx17():
    assert SOURCES, "no family sources found"
    with ThreadPoolExecutor(max_workers=2) as pool:
        outputs = dict(zip(SOURCES, pool.map(_compile_cxx17, SOURCES)))
    errors = [error for output in outputs.values() for error in _errors_in_our_files(output)]
    assert not errors, "C++20-only code in a family's C++ half (torch 2.11 compiles it as C++17):\n" + "\n".join(
        errors[:20])


def test_the_check_sees_a_cxx20_construct(tmp_path):
    """The filter above finds an error in one of our files when there is one (the check can fail)."""
    if COMPILER is None:
        pytest.skip("no C++ compiler")
    shutil.copytree(KERNELS / "fused", tmp_path / "kernels" / "fused", ignore=shutil.ignore_patterns("__pycache__"))
    broken = tmp_path / "kernels" / "fused" / "fused.cpp"
    broken.write_text(broken.read_text() + "\ntemplate <typename T> concept AnyType = true;\n")
    output = _compile_cxx17(broken).replace(str(tmp_path / "kernels"), str(KERNELS))
    assert any("concept" in error for error in _errors_in_our_files(output)), output[-2000:]
