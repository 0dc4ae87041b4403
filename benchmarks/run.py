"""Benchmark every op of every family: ours vs reference eager vs torch.compile(reference)
vs the memory floor (bytes / measured copy rate).

    python benchmarks/run.py [--families fused ebm] [--out benchmarks/results]

Writes <out>/<gpu>.json, <out>/<gpu>.md and <out>/<gpu>.png, and with --update-doc
rewrites the table in BENCHMARKS.md. Cases come from benchmarks/cases_<family>.py.
"""
import argparse
import importlib
import json
import math
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import loader  # noqa: E402


def time_us(fn, device: str) -> float:
    """Median microseconds per call: device events through triton's do_bench on CUDA, wall clock on CPU."""
    if device == "cuda":
        from triton.testing import do_bench

        return do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e3
    fn()
    runs = []
    deadline = time.perf_counter() + 1.0
    while len(runs) < 5 or (time.perf_counter() < deadline and len(runs) < 100):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs) * 1e6


def time_us_loop(fn, calls: int = 200, rounds: int = 5) -> float:
    """Microseconds per call over `calls` calls made back to back and synchronised once (median of
    `rounds`): what a Python loop calling the op sees. For launch-bound sizes that is the host's time
    per call (argument checks, torch.compile's guards, launches), which do_bench's per-call events
    see only in part (how much depends on how long the flush before each call keeps the GPU busy)."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        per_call.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(per_call)


_clean_flush: list = []


def time_us_clean_l2(fn) -> float:
    """Median microseconds per call (CUDA) with the L2 flushed by *reading* 256 MB before each call.
    do_bench flushes by writing 256 MB, which leaves the L2 full of dirty lines: the timed call then
    also writes back up to an L2's worth (50-60 MB) of the flush's data. For a 1 GiB copy that is
    noise; at the issue sizes (~100 MB) a same-size copy then reaches only ~80-90% of the floor. Read
    lines are clean, so this time is the op's own traffic: the fair measure against the floor."""
    if not _clean_flush:
        _clean_flush.append(torch.empty(256 << 20, dtype=torch.int8, device="cuda"))
    flush = _clean_flush[0]
    for _ in range(5):
        fn()
    times = []
    for _ in range(100):
        flush.sum(dtype=torch.int32)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        times.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in times)


def copy_rate_gbps(device: str) -> float:
    """Device-to-device copy rate, counting bytes read plus bytes written."""
    n = (1 << 28) if device == "cuda" else (1 << 25)  # 1 GiB / 128 MiB of float32
    src = torch.randn(n, device=device)
    dst = torch.empty_like(src)
    us = time_us(lambda: dst.copy_(src), device)
    return 2 * src.numel() * src.element_size() / (us * 1e-6) / 1e9


_same_size_copy: dict[int, float] = {}


def same_size_copy_us(nbytes: int, device: str) -> float:
    """Time of a device-to-device copy moving `nbytes` (half read, half written), timed like the ops.
    The floor uses the rate of a 2 GiB copy; at ~100 MB the same copy reaches only ~80% of that rate
    under do_bench (launch, ramp and the flush's dirty L2 lines are fixed costs), so this says how
    close an op is to what a copy of its own size achieves."""
    if nbytes not in _same_size_copy:
        src = torch.empty(max(1, nbytes // 8), dtype=torch.float32, device=device)
        dst = torch.empty_like(src)
        _same_size_copy[nbytes] = time_us(lambda: dst.copy_(src), device)
    return _same_size_copy[nbytes]


def run_case(case, device: str, floor_rate: float) -> dict:
    row = {"family": case.family, "op": case.op, "shape": case.shape, "dtype": case.dtype, "note": case.note,
           "bytes": case.bytes, "flops": case.flops, **case.extra}
    row["ours_us"] = time_us(lambda: case.ours(*case.args), device)
    compiled = None
    if case.reference is not None:
        row["eager_us"] = time_us(lambda: case.reference(*case.args), device)
        if case.compile:
            try:
                # Cases built by one helper share a code object, so without a reset their
                # compiles pile up in one cache, hit dynamo's recompile limit and fall back to
                # eager (seen for the last blog sizes of `normal`).
                torch._dynamo.reset()
                compiled = torch.compile(case.reference, dynamic=False)
                compiled(*case.args)
                row["compile_us"] = time_us(lambda: compiled(*case.args), device)
            except Exception as exc:  # report, don't stop the run
                row["compile_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    if case.bytes:
        row["floor_us"] = case.bytes / (floor_rate * 1e9) * 1e6
        row["of_floor"] = row["floor_us"] / row["ours_us"]
        if device == "cuda":
            row["ours_clean_us"] = time_us_clean_l2(lambda: case.ours(*case.args))
            row["of_floor_clean"] = row["floor_us"] / row["ours_clean_us"]
            if "compile_us" in row:  # torch.compile under the same clean flush, for a like-for-like ratio
                row["compile_clean_us"] = time_us_clean_l2(lambda: compiled(*case.args))
        row["copy_us"] = same_size_copy_us(case.bytes, device)
        row["of_copy"] = row["copy_us"] / row["ours_us"]
    if case.launch_bound and device == "cuda":
        row["ours_loop_us"] = time_us_loop(lambda: case.ours(*case.args))
        if case.reference is not None:
            row["eager_loop_us"] = time_us_loop(lambda: case.reference(*case.args))
        if compiled is not None:
            row["compile_loop_us"] = time_us_loop(lambda: compiled(*case.args))
    if case.flops:
        row["tflops"] = case.flops / (row["ours_us"] * 1e-6) / 1e12
    # How many times faster ours is, each timing against the same timing: vs_eager, vs_compile_clean, ...
    for base in ("eager", "compile"):
        for timing in ("", "_clean", "_loop"):
            if f"{base}{timing}_us" in row:
                row[f"vs_{base}{timing}"] = row[f"{base}{timing}_us"] / row[f"ours{timing}_us"]
    return row


def environment(device: str, rate: float) -> dict:
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout if device == "cuda" else ""
    match = re.search(r"release (\d+\.\d+)", nvcc)
    return {
        "device": torch.cuda.get_device_name(0) if device == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__, "cuda": torch.version.cuda, "nvcc": match.group(1) if match else None,
        "python": platform.python_version(), "copy_rate_gbps": round(rate, 1),
        "date": time.strftime("%Y-%m-%d"),
    }


def _fmt(value, spec):
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def markdown(env: dict, rows: list[dict]) -> str:
    lines = [f"Device: **{env['device']}**, torch {env['torch']}, CUDA {env['cuda']}, nvcc {env['nvcc']}, "
             f"Python {env['python']}, {env['date']}. Copy rate measured in the same run: "
             f"{env['copy_rate_gbps']:.0f} GB/s (read + write). Times are medians in µs; "
             "'× eager' and '× compile' are how many times faster ours is; '% floor' is the memory floor "
             "(fewest bytes / copy rate) over our time; '% copy' is the time of a device copy moving the same bytes "
             "(half read, half written; timed the same way) over our time. All of these are timed by triton's do_bench, "
             "which flushes the L2 by writing 256 MB before each call (so each call also writes back the flush's dirty "
             "lines); '% floor, clean L2' is the floor over our time with the L2 flushed by reading instead "
             "(the op's own traffic only, as in the copy the floor comes from; benchmarks/run.py: time_us_clean_l2), "
             "and '× compile, clean L2' the torch.compile ratio timed that way too.", "",
             "| family | op | shape | dtype | ours µs | eager µs | compile µs | × eager | × compile | floor µs | % floor | "
             "% copy | % floor, clean L2 | × compile, clean L2 | TFLOP/s | note |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        pct = r.get("of_floor")
        lines.append(
            f"| {r['family']} | {r['op']} | {r['shape']} | {r['dtype']} | {_fmt(r.get('ours_us'), '.1f')} | "
            f"{_fmt(r.get('eager_us'), '.1f')} | {_fmt(r.get('compile_us'), '.1f')} | "
            f"{_fmt(r.get('vs_eager'), '.2f')} | {_fmt(r.get('vs_compile'), '.2f')} | "
            f"{_fmt(r.get('floor_us'), '.1f')} | {_fmt(pct * 100 if pct else None, '.0f')} | "
            f"{_fmt(r['of_copy'] * 100 if r.get('of_copy') else None, '.0f')} | "
            f"{_fmt(r['of_floor_clean'] * 100 if r.get('of_floor_clean') else None, '.0f')} | "
            f"{_fmt(r.get('vs_compile_clean'), '.2f')} | {_fmt(r.get('tflops'), '.2f')} | {r.get('note', '')}{' ' + r['compile_error'] if 'compile_error' in r else ''} |")
    looped = [r for r in rows if r.get("ours_loop_us")]
    if looped:
        lines += ["", "Launch-bound cases, timed as a loop sees them (benchmarks/run.py: time_us_loop; µs per call "
                  "of 200 back-to-back calls, host time included):", "",
                  "| family | op | shape | dtype | ours µs | eager µs | compile µs | × eager | × compile |",
                  "|---|---|---|---|---:|---:|---:|---:|---:|"]
        for r in looped:
            lines.append(f"| {r['family']} | {r['op']} | {r['shape']} | {r['dtype']} | {_fmt(r['ours_loop_us'], '.1f')} | "
                         f"{_fmt(r.get('eager_loop_us'), '.1f')} | {_fmt(r.get('compile_loop_us'), '.1f')} | "
                         f"{_fmt(r.get('vs_eager_loop'), '.2f')} | {_fmt(r.get('vs_compile_loop'), '.2f')} |")
    return "\n".join(lines) + "\n"


def plot(env: dict, rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['family']}.{r['op']} {r['shape']} {r['dtype']}" for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(rows) + 1.5))
    y = range(len(rows))
    ax.barh([i - 0.2 for i in y], [r.get("vs_eager") or 0 for r in rows], height=0.4, label="× eager")
    ax.barh([i + 0.2 for i in y], [r.get("vs_compile") or 0 for r in rows], height=0.4, label="× torch.compile")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yticks(list(y), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("speedup of ours (higher is better)")
    ax.set_title(f"jitkernels on {env['device']} (torch {env['torch']}, CUDA {env['cuda']})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def update_benchmarks_doc(env: dict, table: str, png: Path) -> None:
    doc = REPO / "BENCHMARKS.md"
    start, end = "<!-- results:start -->", "<!-- results:end -->"
    text = doc.read_text() if doc.exists() else f"# Benchmarks\n\n{start}\n{end}\n"
    block = f"{start}\n{table}\n![speedups]({png.relative_to(REPO)})\n{end}"
    doc.write_text(re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", nargs="*", help="default: every family with a cases file")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--match", nargs="*", default=[], help="only cases where every word of one pattern is in "
                        "'family op shape dtype' (a quick look at a few ops; the full run writes the results)")
    parser.add_argument("--update-doc", action="store_true", help="rewrite the table in BENCHMARKS.md")
    parser.add_argument("--from-json", type=Path, help="render a committed <gpu>.json (measured on the GPU "
                        "machine) into BENCHMARKS.md instead of running")
    args = parser.parse_args()
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        update_benchmarks_doc(saved["environment"], markdown(saved["environment"], saved["results"]),
                              args.from_json.with_suffix(".png").resolve())
        return 0
    device, out = args.device, Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rate = copy_rate_gbps(device)
    env = environment(device, rate)
    print(f"{env['device']}: copy rate {rate:.0f} GB/s", flush=True)
    rows = []
    for family in args.families or loader.families():
        try:
            module = importlib.import_module(f"benchmarks.cases_{family}")
        except ModuleNotFoundError:
            continue
        try:
            cases = module.cases(device)
        except Exception as exc:
            print(f"{family}: cases failed: {type(exc).__name__}: {exc}", flush=True)
            continue
        for case in cases:
            label = f"{case.family} {case.op} {case.shape} {case.dtype}"
            if args.match and not any(all(word in label for word in p.split()) for p in args.match):
                continue
            try:
                row = run_case(case, device, rate)
            except Exception as exc:
                row = {"family": family, "op": case.op, "shape": case.shape, "dtype": case.dtype,
                       "note": f"FAILED: {type(exc).__name__}: {str(exc)[:200]}"}
            rows.append(row)
            loop = (f"  loop: ours {row['ours_loop_us']:.1f} eager {_fmt(row.get('eager_loop_us'), '.1f')} "
                    f"compile {_fmt(row.get('compile_loop_us'), '.1f')}" if row.get("ours_loop_us") else "")
            # A percentage not measured (no byte count; clean L2 is CUDA only) prints "–", as in the table, not 0.
            percent = {key: _fmt(row[key] * 100 if row.get(key) else None, '4.0f')
                       for key in ("of_floor", "of_copy", "of_floor_clean")}
            print(f"{row['family']:10s} {row['op']:24s} {row['shape']:24s} {row['dtype']:9s} "
                  f"ours {_fmt(row.get('ours_us'), '9.1f')}  eager {_fmt(row.get('eager_us'), '9.1f')}  "
                  f"compile {_fmt(row.get('compile_us'), '9.1f')}  floor% {percent['of_floor']}"
                  f"  copy% {percent['of_copy']}"
                  f"  clean-L2 floor% {percent['of_floor_clean']}"
                  f" x compile {_fmt(row.get('vs_compile_clean'), '.2f')}{loop}"
                  f"  {row.get('note', '')}", flush=True)
        torch.cuda.empty_cache() if device == "cuda" else None
    if args.match:
        return 0
    slug = re.sub(r"[^A-Za-z0-9]+", "-", env["device"]).strip("-").lower()
    (out / f"{slug}.json").write_text(json.dumps({"environment": env, "results": rows}, indent=1))
    table = markdown(env, rows)
    (out / f"{slug}.md").write_text(table)
    plot(env, rows, out / f"{slug}.png")
    if args.update_doc:
        update_benchmarks_doc(env, table, out / f"{slug}.png")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
