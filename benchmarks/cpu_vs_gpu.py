"""The same EBM work on the CPU and on the GPU, with our kernels on both (issue: the EBM guide
claims the GPU is 10-20x faster; this measures what is true on the machine at hand), and plain
PyTorch on the CPU (reference.py, eager) beside them: how the guide's CPU side runs.

    python benchmarks/cpu_vs_gpu.py [--out benchmarks/results]

Writes <out>/cpu_vs_gpu.json and prints a Markdown table. CPU times use every core torch is
allowed (torch.get_num_threads()).
"""
import argparse
import json
import os
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import loader  # noqa: E402
from benchmarks.run import time_us  # noqa: E402


def workloads(device):
    """(name, size, ours, eager) rows, built on `device` with the same shapes and seeds everywhere;
    eager: the same work in plain PyTorch (kernels/ebm/reference.py)."""
    ebm = loader.ebm
    ref = ebm.reference
    g = torch.Generator().manual_seed(0)
    rows = []
    for batch, dim, steps in [(65536, 16, 100), (16384, 256, 20), (4096, 1024, 10)]:
        x = torch.randn(batch, dim, generator=g).to(device)
        mean = torch.randn(dim, generator=g).to(device)
        a = torch.randn(dim, dim, generator=g) / dim ** 0.5
        precision = (a @ a.T + torch.eye(dim)).to(device)
        size = f"B={batch} D={dim}"
        rows.append(("gaussian_score", size, lambda x=x, m=mean, p=precision: ebm.gaussian_score(x, m, p),
                     lambda x=x, m=mean, p=precision: ref.gaussian_score(x, m, p)))
        rows.append(("langevin_chain gaussian", f"{size} steps={steps}",
                     lambda x=x, m=mean, p=precision, s=steps: ebm.langevin_chain(x, "gaussian", s, 0.01, mean=m,
                                                                                  precision=p),
                     lambda x=x, m=mean, p=precision, s=steps: ref.langevin_chain(
                         x, lambda y: ref.gaussian_score(y, m, p), s, 0.01)))
    x = torch.randn(2 ** 20, 16, generator=g).to(device)
    rows.append(("rastrigin_score", "B=2^20 D=16", lambda: ebm.rastrigin_score(x), lambda: ref.rastrigin_score(x)))
    rows.append(("langevin_step", "B=2^20 D=16", lambda: ebm.langevin_step(x, x, 0.01),
                 lambda: ref.langevin_step(x, x, 0.01)))
    rows.append(("hmc_chain double_well", "B=65536 D=16 steps=20 L=5",
                 lambda: ebm.hmc_chain(x[:65536], "double_well", 20, 0.05, n_leapfrog=5),
                 lambda: ref.hmc_chain(x[:65536], ref.double_well_energy, ref.double_well_score, 20, 0.05, 5)))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("needs a GPU: this compares the CPU with the GPU of the same machine")
    results = []
    cpu_rows, gpu_rows = workloads("cpu"), workloads("cuda")
    for (name, size, cpu_call, cpu_eager), (_, _, gpu_call, _) in zip(cpu_rows, gpu_rows):
        cpu_us, gpu_us, eager_us = time_us(cpu_call, "cpu"), time_us(gpu_call, "cuda"), time_us(cpu_eager, "cpu")
        results.append({"op": name, "shape": size, "cpu_us": cpu_us, "gpu_us": gpu_us, "gpu_vs_cpu": cpu_us / gpu_us,
                        "cpu_eager_us": eager_us, "gpu_vs_cpu_eager": eager_us / gpu_us})
    env = {"gpu": torch.cuda.get_device_name(), "cpu_threads": torch.get_num_threads(), "cpus": os.cpu_count(),
           "torch": torch.__version__, "cuda": torch.version.cuda}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "cpu_vs_gpu.json").write_text(json.dumps({"environment": env, "results": results}, indent=1))
    print(f"CPU ({env['cpu_threads']} threads of {env['cpus']} cores) vs {env['gpu']}, torch {env['torch']}, "
          "float32; ours on both, and plain PyTorch (eager) on the CPU\n")
    print("| op | shape | ours CPU µs | eager CPU µs | ours GPU µs | GPU × ours CPU | GPU × eager CPU |\n"
          "|---|---|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['op']} | {r['shape']} | {r['cpu_us']:.0f} | {r['cpu_eager_us']:.0f} | {r['gpu_us']:.1f} | "
              f"{r['gpu_vs_cpu']:.0f} | {r['gpu_vs_cpu_eager']:.0f} |")


if __name__ == "__main__":
    main()
