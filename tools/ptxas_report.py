"""Registers, spills and shared memory of every kernel of a family's CUDA half, from ptxas (no GPU needed).

    python tools/ptxas_report.py diffusion [--match step_kernel] [--arch 90]

Compiles each .cu file of kernels/<family>/ with the loader's CUDA flags and `-Xptxas -v`, and prints one line
per kernel; kernels that spill are marked. Use it before a GPU run: a spilling kernel is rarely at the floor.
"""
import argparse
import re
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import loader  # noqa: E402
from torch.utils import cpp_extension  # noqa: E402


def nvcc_command(family: str, arch: str, output: str, source: Path | None = None) -> list[str]:
    """nvcc for one .cu file of the family (default: <family>.cu)."""
    import torch

    folder = loader.kernels_root() / family
    includes = cpp_extension.include_paths(device_type="cuda") if "device_type" in \
        cpp_extension.include_paths.__code__.co_varnames else cpp_extension.include_paths(cuda=True)
    standard = "-std=c++20" if int(torch.__version__.split(".")[1]) >= 13 else "-std=c++17"
    return (["nvcc", "-c", standard, *loader.CUDA_FLAGS, f"-gencode=arch=compute_{arch},code=sm_{arch}",
             "-DJK_WITH_CUDA", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
             *[f"-I{p}" for p in includes], f"-I{sysconfig.get_paths()['include']}",
             f"-I{loader.kernels_root() / 'common'}", f"-I{folder}", "-Xptxas", "-v",
             str(source or folder / f"{family}.cu"), "-o", output])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("family")
    parser.add_argument("--match", default="", help="only kernels whose name contains this")
    parser.add_argument("--arch", default="90")
    args = parser.parse_args()
    ptxas_output = ""
    for source in sorted((loader.kernels_root() / args.family).glob("*.cu")):
        with tempfile.TemporaryDirectory() as tmp:
            result = subprocess.run(nvcc_command(args.family, args.arch, f"{tmp}/out.o", source),
                                    capture_output=True, text=True)
        if result.returncode != 0:
            print(result.stderr[-4000:], file=sys.stderr)
            return result.returncode
        ptxas_output += result.stderr
    kernel, spill = None, ""
    for line in ptxas_output.splitlines():
        if m := re.search(r"Compiling entry function '(\S+)'", line):
            kernel = subprocess.run(["c++filt", m.group(1)], capture_output=True, text=True).stdout.strip()
        elif kernel and (m := re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)):
            spill = "" if m.group(1) == m.group(2) == "0" else f"  SPILLS {m.group(1)}/{m.group(2)} bytes"
        elif kernel and (m := re.search(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?", line)):
            if args.match in kernel:
                print(f"{m.group(1):>4} regs {m.group(2) or 0:>6} B smem{spill:24s} {kernel[:160]}")
            kernel, spill = None, ""
    return 0


if __name__ == "__main__":
    sys.exit(main())
