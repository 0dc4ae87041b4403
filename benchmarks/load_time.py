"""Load and build times of the `fused` family, three ways, each in fresh processes:

1. ours: `loader.load("fused")` from a warm cache (torch.ops.load_library of the cached library);
2. plain `torch.utils.cpp_extension.load` of the same sources (TORCH_LIBRARY, is_python_module=False);
3. the pybind-style extension the source guides write (torch/extension.h, PYBIND11_MODULE).

Also times a cold `loader.load("fused")` on an empty cache and reports each half (from ninja's log).

    python benchmarks/load_time.py [--out load_time.json] [--repeats 15]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
import loader_build  # noqa: E402
FUSED = REPO / "kernels" / "fused"
PYBIND = REPO / "benchmarks" / "pybind_style"
CUDA = torch.cuda.is_available()

# Every process imports torch and (with a GPU) initialises CUDA before the timed load:
# a user pays both anyway, and all three loaders need them.
PROCESS = """
import json, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
if {init_cuda} and torch.cuda.is_available():
    torch.zeros(1, device="cuda")
t2 = time.perf_counter()
{body}
t3 = time.perf_counter()
print("RESULT " + json.dumps({{"import_torch_s": t1 - t0, "cuda_init_s": t2 - t1, "load_s": t3 - t2,
                              **globals().get("phases", {{}})}}))
"""

OURS = (f"sys.path.insert(0, {str(REPO)!r}); a = time.perf_counter(); import loader; b = time.perf_counter(); "
        "loader.load('fused'); phases = {'import_loader_s': b - a, 'load_call_s': time.perf_counter() - b, "
        "'bytecode_cached': not sys.dont_write_bytecode}")


def plain_body(build_dir: Path) -> str:
    namespace = loader_build.write_namespace_source(build_dir, "jk_fused_plainload")  # what jk.h registers under
    sources = [str(FUSED / "fused.cpp"), str(namespace)] + ([str(FUSED / "fused.cu")] if CUDA else [])
    flags = ["-O3"] + (["-DJK_WITH_CUDA"] if CUDA else [])
    return textwrap.dedent(f"""
        from torch.utils.cpp_extension import load
        load(name="jk_fused_plainload", sources={sources!r}, extra_cflags={flags!r}, extra_cuda_cflags={flags!r},
             extra_include_paths=[{str(REPO / 'kernels' / 'common')!r}], build_directory={str(build_dir)!r},
             is_python_module=False)""")


def pybind_body(build_dir: Path) -> str:
    sources = [str(PYBIND / "relu_add_pybind.cpp")] + ([str(PYBIND / "relu_add_pybind.cu")] if CUDA else [])
    flags = ["-DWITH_CUDA"] if CUDA else []
    return textwrap.dedent(f"""
        from torch.utils.cpp_extension import load
        load(name="relu_add_pybind", sources={sources!r}, extra_cflags={flags!r}, build_directory={str(build_dir)!r})""")


def run(body: str, env: dict, init_cuda: bool = True) -> dict:
    code = PROCESS.format(body=body, init_cuda=init_cuda)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-3000:])
    line = next(line for line in result.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def medians_interleaved(bodies: dict, env: dict, repeats: int) -> dict:
    """Each body (name -> (code, init_cuda)) run in `repeats` fresh processes, the bodies taking turns
    round by round. On the GPU hosts a fresh process runs at one of two speeds, ~1.4x apart in every
    stage alike (session 42 call 1: `results/session42/call1/stages.jsonl`), so each loader's median is
    a draw between them (that call: pybind-style 101-147 ms, ours 2.6-3.5 ms). Taking turns gives every
    loader the same minutes of the host, and 15 rounds (9 before) steady the medians."""
    # The first process after a build writes the bytecode caches (loader.py, ops.py; the baselines'
    # Python too) that every later one reads: timed apart, not in the median.
    first = {name: run(code, env, init_cuda) for name, (code, init_cuda) in bodies.items()}
    runs = {name: [] for name in bodies}
    for _ in range(repeats):
        for name, (code, init_cuda) in bodies.items():
            runs[name].append(run(code, env, init_cuda))
    return {name: {key: statistics.median(r[key] for r in rs) for key in rs[0]}
            | {"runs_load_s": [r["load_s"] for r in rs], "first_run_load_s": first[name]["load_s"]}
            for name, rs in runs.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "load_time.json"))
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="jk-load-time-"))
    env = dict(os.environ, JITKERNELS_CACHE=str(work / "cache"), PYTHONPATH=str(REPO))
    env.pop("JITKERNELS_CUDA", None)
    # Python's default: cache bytecode, so `import loader` reads a .pyc (the GPU image sets
    # PYTHONDONTWRITEBYTECODE; without the cache, compiling loader.py adds ~8 ms to each import).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    report = {"torch": torch.__version__, "cuda": torch.version.cuda,
              "device": torch.cuda.get_device_name(0) if CUDA else "cpu", "cpus": os.cpu_count()}

    # Cold build of `fused`: `loader.load("fused")` on an empty cache in a fresh process, as a user's
    # first load. Reported three ways: the whole process (Python start, import torch, CUDA init, the
    # load), the load call alone (what a session that has imported torch waits), and the loader's own
    # timer around the compile and link, with each half's seconds from ninja's log (the manifest).
    start = time.perf_counter()
    cold = run(OURS, env)
    report["ours_cold_process_s"] = time.perf_counter() - start
    report["ours_cold_build_s"] = cold["load_s"]
    report["ours_cold_process_phases_s"] = {key: cold[key] for key in ("import_torch_s", "cuda_init_s")}
    manifest = json.loads(next((work / "cache" / "fused").glob("*/manifest.json")).read_text())
    report["ours_cold_compile_s"] = manifest["build_seconds"]
    report["ours_cold_steps_s"] = manifest["step_seconds"]

    # Cold builds of the two baselines (run at the same time; indicative only).
    plain_dir, pybind_dir = work / "plain", work / "pybind"
    plain_dir.mkdir()
    pybind_dir.mkdir()
    start = time.perf_counter()
    cold = [subprocess.Popen([sys.executable, "-c", PROCESS.format(body=b, init_cuda=True)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for b in (plain_body(plain_dir), pybind_body(pybind_dir))]
    for name, proc in zip(("plain_cold_build_s", "pybind_cold_build_s"), cold):
        out, err = proc.communicate(timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(err[-3000:])
        report[name] = json.loads(out.split("RESULT ")[1])["load_s"]
    report["baseline_cold_builds_concurrent"] = True
    report["baseline_cold_wall_s"] = time.perf_counter() - start

    report |= medians_interleaved({"ours_warm": (OURS, True), "ours_warm_without_prior_cuda_init": (OURS, False),
                                   "plain_warm": (plain_body(plain_dir), True),
                                   "pybind_warm": (pybind_body(pybind_dir), True)}, env, args.repeats)
    report["warm_runs_interleaved"] = True
    ours = report["ours_warm"]["load_s"]
    report["ratio_plain_over_ours"] = report["plain_warm"]["load_s"] / ours
    report["ratio_pybind_over_ours"] = report["pybind_warm"]["load_s"] / ours
    shutil.rmtree(work, ignore_errors=True)

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(f"device {report['device']}, torch {report['torch']}, CUDA {report['cuda']}, {report['cpus']} CPUs")
    print(f"cold build of fused: load {report['ours_cold_build_s']:.1f} s (compile and link "
          f"{report['ours_cold_compile_s']:.1f} s; steps: {report['ours_cold_steps_s']}), whole fresh process "
          f"{report['ours_cold_process_s']:.1f} s")
    print(f"warm load, fresh process (after import torch and CUDA init): ours {ours * 1e3:.2f} ms, "
          f"plain cpp_extension.load {report['plain_warm']['load_s'] * 1e3:.1f} ms "
          f"({report['ratio_plain_over_ours']:.1f}x), pybind-style {report['pybind_warm']['load_s'] * 1e3:.1f} ms "
          f"({report['ratio_pybind_over_ours']:.1f}x)")
    print(f"ours, of which import loader {report['ours_warm']['import_loader_s'] * 1e3:.2f} ms and "
          f"loader.load {report['ours_warm']['load_call_s'] * 1e3:.2f} ms (bytecode cache on: "
          f"{bool(report['ours_warm']['bytecode_cached'])})")
    print(f"ours without a prior CUDA init: {report['ours_warm_without_prior_cuda_init']['load_s'] * 1e3:.2f} ms; "
          f"import torch {report['ours_warm']['import_torch_s']:.2f} s, CUDA init {report['ours_warm']['cuda_init_s']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
