"""Every family's sources must compile where we cannot run them: as C++17 as well as C++20, and for aarch64.

C++17: torch 2.11 (the GPU machine's) builds extensions with -std=c++17; newer torch (requirements.txt's) with
-std=c++20. A C++20-only construct in our sources then builds here and fails there (session 26: a
requires-expression in ebm.cpp took ebm down on the GPU machine). Newer torch's own headers are not C++17
any more, so each source is compiled with -std=c++17 and only errors reported in our files fail the test:
the C++ halves with the C++ compiler (syntax only), the CUDA files with nvcc where it is installed (its
front end, with no limit on the count of errors, so ours are reported after the headers').

aarch64: a GH200 node is an aarch64 host beside an H100, and there the C++ half is built with g++ for ARM, with
none of the x86 vector flags. Every x86 intrinsic and target attribute in our CPU code sits behind an
`__x86_64__`/`__AVX__` guard; the C++ halves are compiled with aarch64-linux-gnu-g++ (syntax only, where the
cross compiler is installed: `.ci/run` installs it) so that an unguarded one fails here, not on a user's node.
"""
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from torch.utils import cpp_extension

import loader
import loader_build
from conftest import rerun_tests

KERNELS = loader.REPO / "kernels"
COMPILER = shutil.which("c++") or shutil.which("g++")
ARM_COMPILER = shutil.which("aarch64-linux-gnu-g++")
CUDA_HOME = loader_build._cuda_home()
NVCC = CUDA_HOME / "bin" / "nvcc" if CUDA_HOME and (CUDA_HOME / "bin" / "nvcc").exists() else None
TORCH_INCLUDES = [flag for path in cpp_extension.include_paths() for flag in ("-isystem", path)]
# A C++ half with its CUDA half's code in (-DJK_WITH_CUDA), where a toolkit's headers are here.
WITH_CUDA = ["-DJK_WITH_CUDA", "-isystem", str(CUDA_HOME / "include")] if CUDA_HOME else []
# Ours: "path:line:col: [fatal ]error:" (g++) or "path(line): error:" (nvcc), path in kernels/ (absolute or not).
OUR_ERROR = re.compile(rf"({re.escape(str(KERNELS))}|kernels)/\S+?(:\d+:\d+|\(\d+\)): (fatal )?error")


def _compile_for_aarch64(source: Path) -> str:
    """The cross compiler's output for the C++ half `source`, with the CUDA half's code in (a GH200 build)
    and the standard and flags this torch builds with, less the x86 ones (`-m...`)."""
    flags = [flag for flag in loader.CXX_FLAGS if not flag.startswith("-m")]
    command = [ARM_COMPILER, "-std=c++20", "-fsyntax-only", *flags, *WITH_CUDA, *TORCH_INCLUDES,
               "-I", str(KERNELS / "common"), "-I", str(source.parent), str(source)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    return result.stdout + result.stderr


def _compile_cxx17(source: Path) -> str:
    """The compiler's output for `source` (a .cpp or a .cu) as C++17."""
    ours = ["-I", str(KERNELS / "common"), "-I", str(source.parent), "-DTORCH_EXTENSION_NAME=jk_cxx17_check"]
    if source.suffix == ".cu":
        command = [str(NVCC), "-std=c++17", "-Xcudafe", "--error_limit=100000", *cpp_extension.COMMON_NVCC_FLAGS,
                   *loader.CUDA_FLAGS, "-DJK_WITH_CUDA", "-gencode=arch=compute_90,code=sm_90", *TORCH_INCLUDES, *ours,
                   "-c", str(source), "-o", os.devnull]
    else:
        command = [COMPILER, "-std=c++17", "-fsyntax-only", *loader.CXX_FLAGS, *WITH_CUDA, *TORCH_INCLUDES, *ours,
                   str(source)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    return result.stdout + result.stderr


def _errors_in_our_files(output: str) -> list[str]:
    return [line for line in output.splitlines() if OUR_ERROR.match(line)]


def _check(sources: list[Path], compile_one=_compile_cxx17,
           what: str = "C++20-only code in a family (torch 2.11 compiles it as C++17)") -> None:
    assert sources, "no family sources found"
    with ThreadPoolExecutor(max_workers=2) as pool:
        outputs = list(pool.map(compile_one, sources))
    errors = [error for output in outputs for error in _errors_in_our_files(output)]
    assert not errors, f"{what}:\n" + "\n".join(errors[:20])


@pytest.mark.skipif(COMPILER is None, reason="no C++ compiler")
def test_cpp_halves_are_cxx17():
    _check(sorted(KERNELS.glob("*/*.cpp")))


def _torch_headers_are_cxx17() -> bool:
    """Whether this torch's headers compile as C++17 (torch 2.11's do): then its builds are C++17 already."""
    probe = subprocess.run([COMPILER, "-std=c++17", "-fsyntax-only", *TORCH_INCLUDES, "-x", "c++", "-"],
                           input="#include <ATen/core/TensorBase.h>\n", capture_output=True, text=True, timeout=300)
    return probe.returncode == 0


@pytest.mark.skipif(NVCC is None or COMPILER is None, reason="no nvcc")
def test_cuda_files_are_cxx17():
    if _torch_headers_are_cxx17():  # nvcc would compile every file whole: the family builds check this
        pytest.skip("this torch builds CUDA files as C++17 itself")
    _check(sorted(KERNELS.glob("*/*.cu")))


@pytest.mark.parametrize("suffix", [".cpp", ".cu"])
def test_the_check_sees_a_cxx20_construct(tmp_path, suffix):
    """The filter above finds an error in one of our files when there is one (the check can fail)."""
    if (COMPILER if suffix == ".cpp" else NVCC) is None:
        pytest.skip("no compiler for " + suffix)
    shutil.copytree(KERNELS / "fused", tmp_path / "kernels" / "fused", ignore=shutil.ignore_patterns("__pycache__"))
    broken = tmp_path / "kernels" / "fused" / f"fused{suffix}"
    broken.write_text(broken.read_text() + "\ntemplate <typename T> concept AnyType = true;\n")
    output = _compile_cxx17(broken).replace(str(tmp_path / "kernels"), str(KERNELS))
    assert any("concept" in error for error in _errors_in_our_files(output)), output[-2000:]


@pytest.mark.skipif(ARM_COMPILER is None, reason="no aarch64 cross compiler (apt install g++-aarch64-linux-gnu)")
def test_cpp_halves_compile_for_aarch64():
    _check(sorted(KERNELS.glob("*/*.cpp")), _compile_for_aarch64,
           "x86-only code outside its guards (a GH200's aarch64 host cannot build it)")


@pytest.mark.skipif(ARM_COMPILER is None, reason="no aarch64 cross compiler")
def test_the_aarch64_check_sees_an_unguarded_intrinsic(tmp_path):
    """An AVX intrinsic outside the guards is an error in our file (the check can fail)."""
    shutil.copytree(KERNELS / "fused", tmp_path / "kernels" / "fused", ignore=shutil.ignore_patterns("__pycache__"))
    broken = tmp_path / "kernels" / "fused" / "fused.cpp"
    broken.write_text(broken.read_text() + "\nstatic const bool jk_has_avx2 = __builtin_cpu_supports(\"avx2\");\n"
                      "static auto jk_zeros() { return _mm256_setzero_ps(); }\n")
    output = _compile_for_aarch64(broken).replace(str(tmp_path / "kernels"), str(KERNELS))
    errors = _errors_in_our_files(output)
    assert any("_mm256_setzero_ps" in error for error in errors), output[-2000:]


# The x86 vector flags out of the C++ halves' flags (they are in the cache key, so this is a build of its own).
_WITHOUT_VECTOR_FLAGS = """
import loader
loader.CXX_FLAGS[:] = [flag for flag in loader.CXX_FLAGS if flag not in ("-mavx2", "-mfma", "-mf16c")]
"""


def test_cpu_kernels_built_without_x86_vector_flags():
    """The generic CPU code, which an aarch64 host (or an x86 one without AVX2) runs, is otherwise never run
    here: fused and ebm built without -mavx2 -mfma -mf16c (the scalar float16 conversions, the unvectorized
    row energies) against the bit-exact and reference tests, on the CPU."""
    rerun_tests(["test_fused.py", "test_ebm.py"],
                "cpu and (every_value or matches_reference or local_energy_and_score or gaussian_energy_and_score"
                " or langevin_chain_without_noise)", {"JITKERNELS_CUDA": "0"}, before=_WITHOUT_VECTOR_FLAGS)
