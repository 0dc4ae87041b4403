#!/usr/bin/env python
"""Broad audit of every jitkernels op against its family's plain-PyTorch reference, on one device.

    python tools/audit_ops.py [--device cuda|cpu] [--root PROJECT] [--only SECTION,...] [--list] [--all] [--verbose]

Written in session 24 (it found the silent wrong results listed in README's Known issues); the CPU run
takes ~30-70 s on the 2-core dev machine (67 s and 21,546 checks in session 41). tools/gpu_check.sh runs
it on the GPU as STEPS=audit.

Output: one line per FAILED check, "FAIL <op> [<case>]: <what was wrong>" (max |diff| and the worst
element, NaN where the reference is finite, finite where it is NaN/inf, an unexpected exception, a
statistic off by more than 6 standard errors, ...), at most 4 lines per op and kind of failure unless
--all (the rest are counted and summarised), then "time: ..." and "checks: N, failures: K".
Failures that match a deviation already known and left (KNOWN below) are still counted, but their
line ends with "<known: ...>", so a run separates new problems.

How it compares: inputs are built on the CPU from a seeded generator and placed on the device in the
layout under test (contiguous, transposed, sliced with NaN in the gaps, misaligned storage offset,
stride-0 expanded, permuted); the reference always reads the device tensor's values. References run on
the CPU, on float64 copies first; a case passes if the op matches any candidate: the float64 result
rounded to the op's dtype, the reference run in the op's own dtype (so float32 overflow that both sides
share is not reported), and for a few ops an exact variant (argument-reduced cos/sin, a GroupNorm that
accepts one value per group, the half-rounded convolution that CPU/cuDNN do). Tolerances: float64 1e-9,
float32 1e-4 (1e-5 for the diffusion steps), float16 1e-2, bfloat16 1.6e-2 (2 ulps), relative to
|ref| + 0.1 * max|ref| of the tensor (sums with cancellation). NaN/inf positions must match exactly,
except reference NaN in cases whose inputs hold +-inf (inf - inf). Random ops are checked for
determinism (torch.manual_seed and explicit generators), finiteness, moments against exact values
(normal, ULA on a Gaussian) or against the reference sampler in law (two-sample z-tests, 6 SE), and for
random-stream overlap between consecutive calls.

Robustness: the sections run in a child process; if it dies (segfault, lost CUDA context) the parent
reports that section as one failure and restarts the child at the next section. TF32 is off (cuDNN and
matmul) so float32 is compared at float32 accuracy; one conv check runs with cuDNN TF32 on at 5e-3.
"""
import argparse
import itertools
import math
import os
import subprocess
import sys
import time
import traceback

F16, BF16, F32, F64 = "float16", "bfloat16", "float32", "float64"

# ----------------------------------------------------------------------------------------- CLI

def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default=None)
    ap.add_argument("--root", default=os.environ.get("JK_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the project root holding loader.py (default: $JK_ROOT, else the repository of this script)")
    ap.add_argument("--only", default=None, help="comma-separated section names (see --list)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--verbose", action="store_true", help="print per-section time and counts (and tracebacks)")
    ap.add_argument("--all", action="store_true", help="print every FAIL line (default: at most 4 per op and kind of failure)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    return ap.parse_args()


ARGS = parse()

# ----------------------------------------------------------------------------------------- supervisor

def supervise():
    """Run the sections in a child process; restart it after the section where it died."""
    t0 = time.time()
    start, total_n, total_k, total_known = 0, 0, 0, 0
    names = None
    while True:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--start", str(start), "--root", ARGS.root]
        if ARGS.device:
            cmd += ["--device", ARGS.device]
        if ARGS.only:
            cmd += ["--only", ARGS.only]
        if ARGS.verbose:
            cmd += ["--verbose"]
        if ARGS.list:
            cmd += ["--list"]
        if ARGS.all:
            cmd += ["--all"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        cur, cur_name, done_n, done_k, done_known, finished = None, None, 0, 0, 0, False
        for line in proc.stdout:
            if line.startswith("@@SECTIONS "):
                names = line.split()[1:]
            elif line.startswith("@@SECTION "):
                _, idx, cur_name = line.split()
                cur = int(idx)
            elif line.startswith("@@COUNTS "):
                _, n, k, kn = line.split()
                done_n, done_k, done_known = int(n), int(k), int(kn)
            elif line.startswith("@@DONE"):
                finished = True
            else:
                sys.stdout.write(line)
                sys.stdout.flush()
        rc = proc.wait()
        total_n += done_n
        total_k += done_k
        total_known += done_known
        if finished and rc == 0:
            break
        # The child died (or exited on a lost CUDA context) inside section `cur`.
        total_n += 1
        total_k += 1
        print(f"FAIL section {cur_name} [child process]: died with rc={rc} "
              f"({'signal ' + str(-rc) if rc < 0 else 'exit'}); checks after the crash point in this section skipped",
              flush=True)
        if cur is None or names is None or cur + 1 >= len(names):
            break
        start = cur + 1
    if ARGS.list:
        return 0
    print(f"time: {time.time() - t0:.1f} s; failures that match known deviations: {total_known}")
    print(f"checks: {total_n}, failures: {total_k}")
    return total_k - total_known


if not ARGS.child:
    sys.exit(1 if supervise() else 0)  # 1: a failure that is not a known deviation

# ========================================================================================= child

sys.path.insert(0, ARGS.root)
import warnings  # noqa: E402
warnings.filterwarnings("ignore", category=UserWarning)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as Fnn  # noqa: E402
import loader  # noqa: E402

DEV = torch.device(ARGS.device or ("cuda" if torch.cuda.is_available() else "cpu"))
IS_CUDA = DEV.type == "cuda"
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
# At most 4 threads unless OMP_NUM_THREADS says otherwise: the checks are small ops, and next to other
# busy processes (pytest -n 4, or the CPU and CUDA audits at once on a 16-core GPU machine) 16 threads
# each made a 30 s audit take over 6 minutes (session 25); alone, 4 threads are as fast as 16.
if "OMP_NUM_THREADS" not in os.environ:
    torch.set_num_threads(max(1, min(torch.get_num_threads(), 4)))

DT = {F16: torch.float16, BF16: torch.bfloat16, F32: torch.float32, F64: torch.float64}
DT4 = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
HALF = (torch.float16, torch.bfloat16)
# (rtol, atol): float64 1e-9, float32 1e-4, half types ~1e-2 (bfloat16: 2 ulps).
TOL = {torch.float64: (1e-9, 1e-12), torch.float32: (1e-4, 1e-6), torch.float16: (1e-2, 1e-3),
       torch.bfloat16: (1.6e-2, 1e-3)}
NAN, INF = float("nan"), float("inf")

try:
    loader.prebuild()  # uncached families compile side by side (where there are 8+ CPUs); no-op when cached
except Exception:  # noqa: BLE001  (a failed family's load raises below)
    pass
fused = loader.load("fused")
ebm = loader.load("ebm")
sampling = loader.load("sampling")
diffusion = loader.load("diffusion")
linalg = loader.load("linalg")
RF, RE, RS, RD, RL = (fused.reference, ebm.reference, sampling.reference, diffusion.reference, linalg.reference)


class FatalDeviceError(Exception):
    pass


class Counter:
    n = 0
    k = 0
    known = 0


def short(e):
    s = str(e).strip().splitlines()
    s = s[0] if s else ""
    return f"{type(e).__name__}: {s[:220]}"


def fatal(e):
    """A CUDA error that poisons the context (illegal address, launch failure, ...)."""
    if not IS_CUDA:
        return False
    s = str(e)
    if "CUDA error" in s or "cudaError" in s or "device-side assert" in s or "illegal" in s:
        try:
            torch.cuda.synchronize()
            torch.empty(1, device=DEV).add_(1).cpu()
            return False
        except Exception:
            return True
    return False


# Deviations the CPU run of this script found (2 cores, torch 2.14): failures that match are still
# counted, but their line says so, so that a GPU run separates them from CUDA-only problems.
KNOWN = [
    (r"ebm\.gaussian_energy", r"(P|mean)=3e\+38", r".",
     "overflow within 2x of FLT_MAX (e.g. a diagonal precision entry > FLT_MAX/2 gives inf)"),
    (r"ebm\.gaussian_(energy|score)", r"(x|mean|P)=-?inf|float16 .*=1e\+30", r"NaN where ref is inf",
     "infinite inputs (float16 1e30 is inf) on CUDA: the kernels sum the quadratic form in another order "
     "than the reference (inf - inf), and D=16 float32 multiplies split TF32 pieces on the tensor cores (inf * 0)"),
    # Float32 statistics on CUDA whose squares overflow past ~1.8e19 (the CPU kernels and the float64
    # reference do not); eager torch's float32 GroupNorm on CUDA overflows as well.
    (r"sampling\.cem_update", r"huge samples", r"std: NaN where ref is finite",
     "CUDA: the elite statistics sum squared deviations in float32 (float64 for float64 samples)"),
    (r"diffusion\.conv1d_gn_mish", r"float32 bias=3e\+38", r"NaN where ref is finite",
     "CUDA: GroupNorm's float32 statistics overflow for activations past ~1.8e19"),
]
CAP = 4
_SEEN = {}
_SUPPRESSED = {}


def report(op, case, msg):
    import re
    Counter.k += 1
    note = ""
    for rop, rcase, rmsg, text in KNOWN:
        if re.search(rop, op) and re.search(rcase, case) and re.search(rmsg, msg):
            note = f"  <known: {text}>"
            Counter.known += 1
            break
    sig = (op, re.sub(r"[-+]?[0-9][0-9.e+-]*", "#", msg)[:48], note)
    _SEEN[sig] = _SEEN.get(sig, 0) + 1
    if ARGS.all or _SEEN[sig] <= CAP:
        print(f"FAIL {op} [{case}]: {msg}{note}", flush=True)
    else:
        _SUPPRESSED[sig] = _SUPPRESSED.get(sig, 0) + 1


def print_suppressed():
    for (op, sig, note), n in _SUPPRESSED.items():
        print(f"FAIL ... {n} more like the {op} lines above ('{sig}...'{', known' if note else ''}); --all prints them",
              flush=True)
    _SUPPRESSED.clear()


def check(op, case, fn):
    """fn() -> None/"" (pass) or a message (fail). Exceptions are failures."""
    Counter.n += 1
    try:
        msg = fn()
    except Exception as e:  # noqa: BLE001
        if fatal(e):
            report(op, case, f"FATAL {short(e)}")
            raise FatalDeviceError(str(e))
        msg = "unexpected exception " + short(e)
        if ARGS.verbose:
            traceback.print_exc()
    if msg:
        report(op, case, msg)


def expect_raise(op, case, fn, exc=(ValueError, RuntimeError, TypeError, IndexError)):
    def run():
        try:
            fn()
        except exc:
            return None
        return f"no exception (expected {'/'.join(e.__name__ for e in exc)})"
    check(op, case, run)


# ----------------------------------------------------------------------------------------- inputs

RNG = torch.Generator().manual_seed(0)


def reseed(s):
    RNG.manual_seed(s)


def randn(*shape, scale=1.0, dtype=torch.float64):
    return (torch.randn(*shape, generator=RNG, dtype=torch.float64) * scale).to(dtype)


def rand(*shape, dtype=torch.float64):
    return torch.rand(*shape, generator=RNG, dtype=torch.float64).to(dtype)


def place(x, layout="contig"):
    """A device tensor with x's values (x: CPU tensor) in the given layout.
    contig | t (last two dims stored transposed) | slice (every other element of a wider buffer,
    gaps NaN) | offset (storage offset 1: misaligned for vector loads; slot 0 NaN) |
    expand (stride 0 along dim 0: row 0 repeated; values change!) | perm (dims reversed in storage)."""
    if layout == "contig" or x.dim() == 0:
        return x.to(DEV)
    if layout == "t":
        if x.dim() < 2:
            return place(x, "slice")
        return x.transpose(-1, -2).contiguous().to(DEV).transpose(-1, -2)
    if layout == "perm":
        if x.dim() < 3:
            return place(x, "t")
        p = list(range(x.dim()))[::-1]
        return x.permute(p).contiguous().to(DEV).permute(p)
    fill = NAN if x.is_floating_point() else 0
    if layout == "slice":
        shp = list(x.shape)
        shp[-1] *= 2
        base = torch.full(shp, fill, dtype=x.dtype)
        base[..., ::2] = x
        return base.to(DEV)[..., ::2]
    if layout == "offset":
        base = torch.full((x.numel() + 1,), fill, dtype=x.dtype)
        base[1:] = x.reshape(-1)
        return base.to(DEV)[1:].view(x.shape)
    if layout == "expand":
        if x.shape[0] == 0:
            return x.to(DEV)
        return x[:1].to(DEV).expand(x.shape)
    raise ValueError(layout)


def dev(x):
    return x.to(DEV) if isinstance(x, torch.Tensor) else x


def c64(x):
    """CPU float64 copy of a (device) tensor; ints stay ints."""
    if not isinstance(x, torch.Tensor):
        return x
    x = x.detach().cpu()
    return x.double() if x.is_floating_point() else x


def cnat(x):
    """CPU copy in the op's compute dtype (float32 for half types)."""
    if not isinstance(x, torch.Tensor):
        return x
    x = x.detach().cpu()
    return x.float() if x.dtype in HALF else x


# ----------------------------------------------------------------------------------------- comparison

def _where(mask, a, r, shape):
    i = int(mask.reshape(-1).nonzero()[0])
    idx = tuple(int(v) for v in torch.unravel_index(torch.tensor(i), shape)) if len(shape) else ()
    return idx, a.reshape(-1)[i].item(), r.reshape(-1)[i].item(), int(mask.sum())


def _cmp1(a, r, rtol, atol, srel, skip_ref_nan):
    if tuple(a.shape) != tuple(r.shape):
        return f"shape {tuple(a.shape)} != ref {tuple(r.shape)}"
    if a.numel() == 0:
        return None
    an, rn = torch.isnan(a), torch.isnan(r)
    ai, ri = torch.isinf(a), torch.isinf(r)
    msgs = []
    m = an & ~rn
    if m.any():
        idx, av, rv, c = _where(m, a, r, a.shape)
        msgs.append(f"NaN where ref is {'inf' if math.isinf(rv) else 'finite'} ({c} el., e.g. {idx}: ref {rv:.6g})")
    m = rn & ~an
    if m.any() and not skip_ref_nan:
        idx, av, rv, c = _where(m, a, r, a.shape)
        msgs.append(f"{'inf' if math.isinf(av) else 'finite'} where ref is NaN ({c} el., e.g. {idx}: op {av:.6g})")
    m = ri & ~an & (a != r)
    if m.any():
        idx, av, rv, c = _where(m, a, r, a.shape)
        msgs.append(f"op {av:.6g} where ref is {rv} ({c} el., e.g. {idx})")
    m = ai & ~ri & ~rn
    if m.any():
        idx, av, rv, c = _where(m, a, r, a.shape)
        msgs.append(f"{av} where ref finite ({c} el., e.g. {idx}: ref {rv:.6g})")
    fin = torch.isfinite(a) & torch.isfinite(r)
    if fin.any():
        af, rf = a[fin], r[fin]
        M = rf.abs().max()
        err = (af - rf).abs()
        lim = atol + rtol * (rf.abs() + srel * M)
        bad = err > lim
        if bad.any():
            j = int(torch.argmax(err / lim))
            rel = err[j] / rf[j].abs().clamp_min(1e-300)
            msgs.append(f"max|diff| {err.max().item():.3g} (max|ref| {M.item():.3g}); worst: op {af[j].item():.8g} "
                        f"ref {rf[j].item():.8g} rel {rel.item():.2g}; {int(bad.sum())}/{fin.sum().item()} el. "
                        f"beyond rtol {rtol:g}")
    return "; ".join(msgs) or None


def compare(out, refs, rtol, atol, srel=0.1, skip_ref_nan=False, dtype=None):
    """out: tensor (any device). refs: tensor, callable or list of them (candidates, tried lazily:
    pass if any matches; the message is against the first)."""
    if not isinstance(out, torch.Tensor):
        return f"not a tensor: {type(out).__name__}"
    if dtype is not None and out.dtype != dtype:
        return f"dtype {out.dtype} != expected {dtype}"
    if out.device.type != DEV.type:
        return f"output on {out.device}, expected {DEV}"
    a = out.detach().cpu().double()
    if not isinstance(refs, (list, tuple)):
        refs = [refs]
    first, raised = None, None
    for r in refs:
        if callable(r):
            try:
                r = r()
            except Exception as e:  # noqa: BLE001  (a reference that cannot evaluate this case)
                raised = raised or short(e)
                continue
        r = r.detach().cpu().double()
        msg = _cmp1(a, r, rtol, atol, srel, skip_ref_nan)
        if msg is None:
            return None
        first = first or msg
    return first or f"every reference raised ({raised})"


def rounded(t, dtype):
    """A reference value as the op's output dtype would hold it."""
    return t.to(dtype) if dtype in HALF or dtype == torch.float32 else t


def cands(ref_fn, args, out_dtype, kwargs=None, native=True):
    """Candidate references: ref_fn on float64 copies, and (lazily) on compute-dtype copies."""
    kwargs = kwargs or {}
    c = [lambda: rounded(ref_fn(*[c64(a) for a in args], **{k: c64(v) for k, v in kwargs.items()}), out_dtype)]
    if native and out_dtype != torch.float64:
        c.append(lambda: rounded(ref_fn(*[cnat(a) for a in args], **{k: cnat(v) for k, v in kwargs.items()}),
                                 out_dtype))
    return c


def ztest(name, got, expected, se, z=6.0, slack=0.0):
    """'' if |got - expected| <= z*se + slack elementwise, else a message."""
    got, expected, se = (torch.as_tensor(v, dtype=torch.float64).cpu() for v in (got, expected, se))
    if not torch.isfinite(got).all():
        return f"{name}: non-finite statistic"
    dev_ = (got - expected).abs()
    lim = z * se + slack
    if (dev_ > lim).any():
        j = int(torch.argmax(dev_ / lim))
        return (f"{name} off: got {got.reshape(-1)[j].item():.5g} expected {expected.reshape(-1)[j].item():.5g} "
                f"(|z| {(dev_.reshape(-1)[j] / se.reshape(-1)[j].clamp_min(1e-300)).item():.1f}, limit {z} SE"
                f"{' + slack' if slack else ''})")
    return ""


def two_sample(name, a, b, z=6.0):
    """Compare per-column mean and mean square of two sample sets (n, d) that should be equal in law."""
    a, b = a.detach().cpu().double().reshape(a.shape[0], -1), b.detach().cpu().double().reshape(b.shape[0], -1)
    if not torch.isfinite(a).all():
        return f"{name}: op samples not finite ({int((~torch.isfinite(a)).sum())} el.)"
    msgs = []
    for tag, fa, fb in (("mean", a, b), ("mean square", a * a, b * b)):
        se = (fa.var(0) / fa.shape[0] + fb.var(0) / fb.shape[0]).sqrt().clamp_min(1e-12)
        m = ztest(f"{name} {tag}", fa.mean(0), fb.mean(0), se, z)
        if m:
            msgs.append(m)
    return "; ".join(msgs)


def gen(seed):
    return torch.Generator(device=DEV).manual_seed(seed)


# ========================================================================================= sections

SECTIONS = []


def section(fn):
    SECTIONS.append(fn)
    return fn


# ----------------------------------------------------------------------------------------- fused

@section
def fused_relu_add():
    reseed(1)
    ref = RF.relu_add
    sizes = [0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 127, 129, 1023, 1025, 4099, 65537, (1 << 20) + 3]
    shapes = [(n,) for n in sizes] + [(3, 1031), (2, 3, 4, 5), (0, 3), (1, 1)]
    for dt in DT4:
        rtol, atol = TOL[dt]
        for i, shp in enumerate(shapes):
            bias = [0.0, 0.5, -3.0][i % 3]
            x, y = place(randn(*shp, dtype=dt)), place(randn(*shp, dtype=dt))
            check("fused.relu_add", f"{dt} {shp} bias={bias}",
                  lambda: compare(fused.relu_add(x, y, bias), cands(lambda a, b: ref(a, b, bias), [x, y], dt),
                                  rtol, atol, srel=0.0, dtype=dt))
        for lx, ly in itertools.product(["contig", "t", "slice", "offset", "expand"], repeat=2):
            x, y = place(randn(37, 65, dtype=dt), lx), place(randn(37, 65, dtype=dt), ly)
            check("fused.relu_add", f"{dt} layout x={lx} y={ly}",
                  lambda: compare(fused.relu_add(x, y, 0.3), cands(lambda a, b: ref(a, b, 0.3), [x, y], dt),
                                  rtol, atol, srel=0.0, dtype=dt))
        for bias in [0.0, 1e5, 1e40, -1e40, NAN, INF, -INF]:
            for shp in [(7,), (3, 1031)]:
                x, y = randn(*shp), randn(*shp)
                fl_x, fl_y = x.view(-1), y.view(-1)
                for j, v in enumerate([NAN, INF, -INF, -0.0, 3e38, -3e38, 1e-40, 7e4]):
                    fl_x[(j * 5) % x.numel()] = v
                    fl_y[(j * 7 + 3) % y.numel()] = v
                fl_x[-1], fl_y[-2] = INF, -INF   # tails of vector loops
                x, y = place(x.to(dt)), place(y.to(dt))
                check("fused.relu_add", f"{dt} special values {shp} bias={bias}",
                      lambda: compare(fused.relu_add(x, y, bias), cands(lambda a, b: ref(a, b, bias), [x, y], dt),
                                      rtol, atol, srel=0.0, skip_ref_nan=True, dtype=dt))
    for dt in HALF:
        x = place(torch.tensor([6e4, -6e4, 3e4, 1e-7]).to(dt))
        check("fused.relu_add", f"{dt} overflow", lambda: compare(
            fused.relu_add(x, x, 0.0), cands(lambda a, b: ref(a, b, 0.0), [x, x], dt), *TOL[dt], dtype=dt))
    # autograd
    for dt in [torch.float64, torch.float32]:
        def run(dt=dt):
            x = place(randn(5, 33, dtype=dt)).requires_grad_()
            y = place(randn(5, 33, dtype=dt)).requires_grad_()
            w = place(randn(5, 33, dtype=dt))
            (fused.relu_add(x, y, 0.5) * w).sum().backward()
            xr, yr = c64(x).requires_grad_(), c64(y).requires_grad_()
            (ref(xr, yr, 0.5) * c64(w)).sum().backward()
            return (compare(x.grad, xr.grad, *TOL[dt]) or "") + (compare(y.grad, yr.grad, *TOL[dt]) or "")
        check("fused.relu_add", f"{dt} backward", run)


# ----------------------------------------------------------------------------------------- ebm rows

MODEL_PARAMS = {"double_well": [{}, dict(barrier_height=0.5, b=1.7)], "harmonic": [{}, dict(k=3.0)],
                "rosenbrock": [{}, dict(a=0.5, b=3.0)], "rastrigin": [{}, dict(a=2.5)],
                "ackley": [{}, dict(a=5.0, b=0.5, c=1.3)]}
DS = [1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 129, 257, 1031]


def ebm_tol(dt, kind):
    rtol, atol = TOL[dt]
    return rtol, atol


@section
def ebm_energy_score():
    reseed(2)
    for model, plist in MODEL_PARAMS.items():
        for dt in DT4:
            for di, D in enumerate(DS):
                if model == "rosenbrock" and D < 2:
                    continue
                p = plist[di % 2]
                for B in ([0, 1, 130] if D in (1, 65) else [1, 130]):
                    x = place(randn(B, D, scale=1.5, dtype=dt))
                    for kind in ["energy", "score"]:
                        op, rf = getattr(ebm, f"{model}_{kind}"), getattr(RE, f"{model}_{kind}")
                        check(f"ebm.{model}_{kind}", f"{dt} B={B} D={D} {p}",
                              lambda: compare(op(x, **p), cands(lambda a: rf(a, **p), [x], dt), *ebm_tol(dt, kind),
                                              dtype=dt))
            # generic entry points and layouts
            p = plist[1]
            for shp, lay in itertools.product([(33, 65), (7, 9)], ["t", "slice", "offset", "expand"]):
                x = place(randn(*shp, scale=1.5, dtype=dt), lay)
                for kind in ["energy", "score"]:
                    op, rf = getattr(ebm, f"{model}_{kind}"), getattr(RE, f"{model}_{kind}")
                    check(f"ebm.{model}_{kind}", f"{dt} layout {lay} {shp}",
                          lambda: compare(op(x, **p), cands(lambda a: rf(a, **p), [x], dt), *ebm_tol(dt, kind),
                                          dtype=dt))
            x = place(randn(6, 17, dtype=dt))
            check("ebm.energy/score", f"{model} {dt} generic entry == named op", lambda: (
                compare(ebm.energy(x, model, **p), getattr(ebm, f"{model}_energy")(x, **p), 0, 0) or
                compare(ebm.score(x, model, **p), getattr(ebm, f"{model}_score")(x, **p), 0, 0)))
    # autograd: energy backward = -score; score backward = autograd of the reference score
    for model, plist in MODEL_PARAMS.items():
        for dt in [torch.float64, torch.float32]:
            p = plist[1]

            def run(model=model, dt=dt, p=p):
                x = place(randn(9, 33, dtype=dt)).requires_grad_()
                w = place(randn(9, 33, dtype=dt))
                (g,) = torch.autograd.grad(getattr(ebm, f"{model}_energy")(x, **p).sum(), x)
                m1 = compare(g, -getattr(RE, f"{model}_score")(c64(x), **p), *TOL[dt], srel=0.1)
                (g2,) = torch.autograd.grad((getattr(ebm, f"{model}_score")(x, **p) * w).sum(), x)
                xr = c64(x).requires_grad_()
                (r2,) = torch.autograd.grad((getattr(RE, f"{model}_score")(xr, **p) * c64(w)).sum(), xr)
                m2 = compare(g2, r2, *TOL[dt], srel=0.1)
                return "; ".join(f"{t}: {m}" for t, m in (("energy grad", m1), ("score vjp", m2)) if m)
            check(f"ebm.{model}", f"{dt} autograd", run)


def _cos_sin_2pi(x, c):
    """cos(c x), sin(c x); for c = 2*pi with the argument reduced exactly (x - round(x) is exact in
    float64), so x beyond 2^24 / 2^53 (integers) gives cos = 1, sin = 0 instead of rounding noise."""
    if abs(c - 2 * math.pi) < 1e-12:
        xr = x - torch.round(x)
        return torch.cos(2 * math.pi * xr), torch.sin(2 * math.pi * xr)
    return torch.cos(c * x), torch.sin(c * x)


def exact_ref(model, kind):
    """Argument-reduced versions of reference.py's rastrigin / ackley formulas (an extra candidate)."""
    def rastrigin(x, a=10.0):
        cs, sn = _cos_sin_2pi(x, 2 * math.pi)
        return a * x.shape[-1] + (x * x - a * cs).sum(-1) if kind == "energy" else -(2 * x + 2 * math.pi * a * sn)

    def ackley(x, a=20.0, b=0.2, c=2 * math.pi):
        cs, sn = _cos_sin_2pi(x, c)
        D = x.shape[-1]
        r = torch.sqrt((x * x).mean(-1, keepdim=True))
        if kind == "energy":
            return (-a * torch.exp(-b * r) - torch.exp(cs.mean(-1, keepdim=True)) + a + math.e).squeeze(-1)
        c0 = torch.where(r > 0, a * b * torch.exp(-b * r) / (D * r), torch.zeros_like(r))
        c1 = torch.exp(cs.mean(-1, keepdim=True)) * c / D
        return -(c0 * x + c1 * sn)
    return {"rastrigin": rastrigin, "ackley": ackley}.get(model)


SPECIAL = [NAN, INF, -INF, 1e30, -1e30, 3e38, 1e20, 6e37, 1e-40, -0.0, 1e10, 1e7 + 0.25, 16777217.0, 0.5, 1e-20]


@section
def ebm_special_values():
    reseed(3)
    for model in MODEL_PARAMS:
        for dt in DT4:
            for D in [3, 33, 65]:
                if model == "rosenbrock" and D < 2:
                    continue
                for v in SPECIAL:
                    for allrow in [False, True]:
                        x = randn(3, D)
                        if allrow:
                            x[1, :] = v
                        else:
                            x[1, D // 2] = v
                            x[2, D - 1] = v
                        x = place(x.to(dt))
                        for kind in ["energy", "score"]:
                            op, rf = getattr(ebm, f"{model}_{kind}"), getattr(RE, f"{model}_{kind}")
                            rtol, atol = ebm_tol(dt, kind)
                            C = cands(rf, [x], dt)
                            if exact_ref(model, kind):
                                C.append(lambda: rounded(exact_ref(model, kind)(c64(x)), dt))
                            check(f"ebm.{model}_{kind}", f"{dt} D={D} x={v} {'whole row' if allrow else 'one el.'}",
                                  lambda: compare(op(x), C, max(rtol, 1e-3), atol, srel=0.1,
                                                  skip_ref_nan=not math.isnan(v), dtype=dt))


@section
def ebm_gaussian():
    reseed(4)
    for dt in DT4:
        rtol, atol = TOL[dt]
        for D in [1, 3, 8, 15, 16, 17, 31, 32, 33, 64, 65, 130]:
            for B in [0, 1, 6, 200] + ([17, 33] if D in (15, 16, 17) else []):
                A = randn(D, D) / D ** 0.5
                P = A @ A.T + torch.eye(D, dtype=torch.float64)
                P[0, -1] += 0.3  # non-symmetric
                mu, x = place(randn(D, dtype=dt)), place(randn(B, D, dtype=dt))
                P = place(P.to(dt))
                for kind in ["energy", "score"]:
                    op, rf = getattr(ebm, f"gaussian_{kind}"), getattr(RE, f"gaussian_{kind}")
                    check(f"ebm.gaussian_{kind}", f"{dt} B={B} D={D}",
                          lambda: compare(op(x, mu, P), cands(rf, [x, mu, P], dt), rtol, atol, dtype=dt))
                if B == 6 or (B == 200 and D in (16, 33, 65)):
                    lays = [("t", "slice", "t"), ("offset", "expand", "offset"), ("slice", "offset", "slice")]
                    for lx, lm, lp in lays:
                        xl = place(x.cpu(), lx)
                        ml = place(torch.full((1,), 0.7, dtype=dt)).expand(D) if lm == "expand" else place(mu.cpu(), lm)
                        Pl = place(P.cpu(), lp)
                        for kind in ["energy", "score"]:
                            op, rf = getattr(ebm, f"gaussian_{kind}"), getattr(RE, f"gaussian_{kind}")
                            check(f"ebm.gaussian_{kind}", f"{dt} B={B} D={D} layout x={lx} mean={lm} P={lp}",
                                  lambda: compare(op(xl, ml, Pl), cands(rf, [xl, ml, Pl], dt), rtol, atol, dtype=dt))
        # special values in x, mean, precision
        for D in [3, 16, 17, 33, 65]:
            for which, v in itertools.product(["x", "mean", "P"], [NAN, INF, -INF, 1e30, 3e38, 1e-40]):
                A = randn(D, D) / D ** 0.5
                P = A @ A.T + torch.eye(D, dtype=torch.float64)
                mu, x = randn(D), randn(5, D)
                {"x": x[1], "mean": mu, "P": P[1]}[which][D // 2] = v
                x, mu, P = place(x.to(dt)), place(mu.to(dt)), place(P.to(dt))
                for kind in ["energy", "score"]:
                    op, rf = getattr(ebm, f"gaussian_{kind}"), getattr(RE, f"gaussian_{kind}")
                    check(f"ebm.gaussian_{kind}", f"{dt} D={D} {which}={v}",
                          lambda: compare(op(x, mu, P), cands(rf, [x, mu, P], dt), max(rtol, 1e-3), atol,
                                          skip_ref_nan=not math.isnan(v), dtype=dt))
    for dt in DT4:
        mu, P = gauss_params(9, dt)
        mu, P, x = place(mu.to(dt)), place(P.to(dt)), place(randn(5, 9, dtype=dt))
        check("ebm.energy/score", f"gaussian {dt} generic entry == named op", lambda: (
            compare(ebm.energy(x, "gaussian", mean=mu, precision=P), ebm.gaussian_energy(x, mu, P).cpu(), 0, 0) or
            compare(ebm.score(x, "gaussian", mean=mu, precision=P), ebm.gaussian_score(x, mu, P).cpu(), 0, 0)))
    # autograd in x, mean, precision
    for dt in [torch.float64, torch.float32]:
        for D in [5, 16, 70]:
            def run(dt=dt, D=D):
                A = randn(D, D) / D ** 0.5
                P = place((A @ A.T + torch.eye(D, dtype=torch.float64)).to(dt)).requires_grad_()
                mu = place(randn(D, dtype=dt)).requires_grad_()
                x = place(randn(7, D, dtype=dt)).requires_grad_()
                w = place(randn(7, dtype=dt))
                g = torch.autograd.grad((ebm.gaussian_energy(x, mu, P) * w).sum(), (x, mu, P))
                xr, mr, Pr = (c64(t).requires_grad_() for t in (x, mu, P))
                gr = torch.autograd.grad((RE.gaussian_energy(xr, mr, Pr) * c64(w)).sum(), (xr, mr, Pr))
                return "; ".join(f"grad {n}: {m}" for n, a, b in zip("x mean P".split(), g, gr)
                                 if (m := compare(a, b, *TOL[dt], srel=0.1)))
            check("ebm.gaussian_energy", f"{dt} D={D} autograd", run)


# ----------------------------------------------------------------------------------------- langevin step

CLAMPS = [None, 0.5, (None, 0.2), (-0.3, None), (-0.1, 0.1), (0.0, 0.0)]


def ref_ls(x, g, eta, clamp):
    return RE.langevin_step(x, g, eta, 0.0, clamp, noise=torch.zeros_like(x))


@section
def ebm_langevin_step():
    reseed(5)
    for dt in DT4:
        rtol, atol = TOL[dt]
        for shp in [(0, 4), (1,), (5,), (3, 7), (2, 3, 1031), (65537,), (257, 33)]:
            for ci, clamp in enumerate(CLAMPS):
                eta = [0.01, 0.3, 1e-8][ci % 3]
                x, g = place(randn(*shp, dtype=dt)), place(randn(*shp, dtype=dt))
                R = cands(lambda a, b: ref_ls(a, b, eta, clamp), [x, g], dt)
                check("ebm.langevin_step", f"{dt} {shp} clamp={clamp} eta={eta}",
                      lambda: compare(ebm.langevin_step(x, g, eta, 0.0, clamp=clamp), R, rtol, atol, srel=0.1,
                                      dtype=dt))
                x2 = x.clone()
                check("ebm.langevin_step_", f"{dt} {shp} clamp={clamp}",
                      lambda: compare(ebm.langevin_step_(x2, g, eta, 0.0, clamp=clamp), R, rtol, atol, srel=0.1) or
                      compare(x2, R, rtol, atol, srel=0.1))
                x3 = x.clone()
                R3 = cands(lambda a: ref_ls(a, a, eta, clamp), [x], dt)
                check("ebm.langevin_step_", f"{dt} {shp} clamp={clamp} grad is x itself",
                      lambda: (ebm.langevin_step_(x3, x3, eta, 0.0, clamp=clamp), compare(x3, R3, rtol, atol, srel=0.1))[1])
        # layouts
        for lx, lg in itertools.product(["contig", "t", "slice", "offset"], ["contig", "t", "slice", "offset", "expand"]):
            x, g = place(randn(33, 65, dtype=dt), lx), place(randn(33, 65, dtype=dt), lg)
            R = cands(lambda a, b: ref_ls(a, b, 0.1, 0.7), [x, g], dt)
            check("ebm.langevin_step", f"{dt} layout x={lx} grad={lg}",
                  lambda: compare(ebm.langevin_step(x, g, 0.1, 0.0, clamp=0.7), R, rtol, atol, srel=0.1, dtype=dt))
            if lx != "contig":
                R2 = cands(lambda a, b: ref_ls(a, b, 0.1, None), [x.clone(), g.clone()], dt)
                check("ebm.langevin_step_", f"{dt} in place, layout x={lx} grad={lg}",
                      lambda: (ebm.langevin_step_(x, g, 0.1, 0.0), compare(x, R2, rtol, atol, srel=0.1))[1])
        # in place with overlapping grad
        for mk in ["grad_t_of_x", "grad_slice_overlap", "grad_shifted"]:
            if mk == "grad_t_of_x":
                base = place(randn(40, 40, dtype=dt)); x, g = base, base.t()
            elif mk == "grad_slice_overlap":
                base = place(randn(40, 40, dtype=dt)); x, g = base[:, :20], base[:, 10:30]
            else:
                flat = place(randn(40 * 41, dtype=dt)); x, g = flat[:1600].view(40, 40), flat[40:].view(40, 40)
            R = cands(lambda a, b: ref_ls(a, b, 0.1, None), [x.clone(), g.clone()], dt)
            check("ebm.langevin_step_", f"{dt} in place, {mk}",
                  lambda: (ebm.langevin_step_(x, g, 0.1, 0.0), compare(x, R, rtol, atol, srel=0.1))[1])
        # special values
        for v in [NAN, INF, -INF, 3e38, 1e-40, -0.0, 7e4]:
            for clamp in [None, 1.0, (None, 0.0)]:
                x, g = randn(1031), randn(1031)
                x[3], g[5], x[-1], g[-2] = v, v, v, v
                x, g = place(x.to(dt)), place(g.to(dt))
                R = cands(lambda a, b: ref_ls(a, b, 0.01, clamp), [x, g], dt)
                check("ebm.langevin_step", f"{dt} special {v} clamp={clamp}",
                      lambda: compare(ebm.langevin_step(x, g, 0.01, 0.0, clamp=clamp), R, rtol, atol, srel=0.1,
                                      skip_ref_nan=not math.isnan(v), dtype=dt))
    # autograd (clamped and not)
    for dt in [torch.float64, torch.float32]:
        for clamp in [None, 0.5]:
            def run(dt=dt, clamp=clamp):
                x = place(randn(6, 9, dtype=dt)).requires_grad_()
                g = place(randn(6, 9, dtype=dt)).requires_grad_()
                w = place(randn(6, 9, dtype=dt))
                gx, gg = torch.autograd.grad((ebm.langevin_step(x, g, 0.1, 0.0, clamp=clamp) * w).sum(), (x, g))
                xr, gr = c64(x).requires_grad_(), c64(g).requires_grad_()
                rx, rg = torch.autograd.grad((ref_ls(xr, gr, 0.1, clamp) * c64(w)).sum(), (xr, gr))
                return (compare(gx, rx, *TOL[dt]) or "") + (compare(gg, rg, *TOL[dt]) or "")
            check("ebm.langevin_step", f"{dt} clamp={clamp} backward", run)


@section
def ebm_langevin_step_random():
    reseed(6)
    for dt in DT4:
        for n in [7, 1025, 300001]:
            x, g = place(torch.zeros(n, dtype=dt)), place(torch.zeros(n, dtype=dt))

            def det():
                torch.manual_seed(3); a = ebm.langevin_step(x, g, 0.5, 1.0)
                torch.manual_seed(3); b = ebm.langevin_step(x, g, 0.5, 1.0)
                c = ebm.langevin_step(x, g, 0.5, 1.0, generator=gen(3))
                c2 = ebm.langevin_step(x, g, 0.5, 1.0, generator=gen(3))
                d = ebm.langevin_step(x, g, 0.5, 1.0, generator=gen(4))
                x2 = x.clone(); ebm.langevin_step_(x2, g, 0.5, 1.0, generator=gen(3))
                m = []
                if not torch.equal(a, b): m.append("manual_seed not reproducible")
                if not torch.equal(c, c2): m.append("generator not reproducible")
                if n > 1 and torch.equal(c, d): m.append("different seeds give the same noise")
                if not torch.equal(x2, c): m.append("in-place differs from out-of-place for the same generator")
                if not torch.isfinite(a).all(): m.append("non-finite noise")
                if a.dtype != dt: m.append(f"dtype {a.dtype}")
                return "; ".join(m)
            check("ebm.langevin_step", f"{dt} n={n} determinism", det)
            if n >= 1025:
                def stats():
                    z = ebm.langevin_step(x, g, 0.5, 1.0, generator=gen(11)).double().cpu()  # sqrt(2*0.5) = 1
                    N = z.numel()
                    m = [ztest("mean", z.mean(), 0.0, 1 / N ** 0.5), ztest("std", z.std(), 1.0, (0.5 / N) ** 0.5, slack=0.01 if dt in HALF else 0),
                         ztest("lag-1 corr", torch.corrcoef(torch.stack([z[:-1], z[1:]]))[0, 1], 0.0, 1 / N ** 0.5),
                         ztest("P(|z|>2)", (z.abs() > 2).double().mean(), 0.0455, (0.0455 * 0.9545 / N) ** 0.5,
                               slack=0.002 if dt in HALF else 0)]
                    return "; ".join(s for s in m if s)
                check("ebm.langevin_step", f"{dt} n={n} noise statistics", stats)
        # noise around a nonzero drift, with clamp
        def drift():
            x, g = place(randn(4000, 33, dtype=dt)), place(randn(4000, 33, dtype=dt))
            eta = 0.02
            out = ebm.langevin_step(x, g, eta, 0.5, generator=gen(5)).double().cpu()
            det_ = RE.langevin_step(c64(x), c64(g), eta, 0.0, noise=torch.zeros(4000, 33, dtype=torch.float64))
            z = ((out - det_) / (0.5 * math.sqrt(2 * eta))).reshape(-1)
            N = z.numel()
            slack = 0.05 if dt in HALF else 0
            m = [ztest("mean", z.mean(), 0, 1 / N ** 0.5, slack=slack), ztest("std", z.std(), 1, (0.5 / N) ** 0.5, slack=slack * 2)]
            oc = ebm.langevin_step(x, g, eta, 5.0, clamp=(-0.5, 0.25), generator=gen(6))
            if not ((oc >= -0.5) & (oc <= 0.25)).all():
                m.append("clamped output outside [-0.5, 0.25]")
            return "; ".join(s for s in m if s)
        check("ebm.langevin_step", f"{dt} noise around drift + clamp bounds", drift)


# ----------------------------------------------------------------------------------------- chains

CHAIN_MODELS = {"double_well": dict(barrier_height=1.0), "harmonic": dict(k=2.0), "rosenbrock": dict(a=1.0, b=5.0),
                "rastrigin": dict(a=1.0), "ackley": {}, "gaussian": None}


def gauss_params(D, dt, seed=None):
    A = randn(D, D) / D ** 0.5
    P = A @ A.T + torch.eye(D, dtype=torch.float64)
    P[0, -1] += 0.2
    return randn(D), P


def chain_params(model, D, dt, layout="contig"):
    if model != "gaussian":
        return dict(CHAIN_MODELS[model])
    mu, P = gauss_params(D, dt)
    return dict(mean=place(mu.to(dt), "slice" if layout != "contig" else "contig"),
                precision=place(P.to(dt), "t" if layout != "contig" else "contig"))


def ref_score_fn(model, p):
    if model == "gaussian":
        mu, P = c64(p["mean"]), c64(p["precision"])
        return lambda y: RE.gaussian_score(y, mu.to(y.dtype), P.to(y.dtype))
    return lambda y: RE.SCORES[model](y, **p)


def ref_energy_fn(model, p):
    if model == "gaussian":
        mu, P = c64(p["mean"]), c64(p["precision"])
        return lambda y: RE.gaussian_energy(y, mu.to(y.dtype), P.to(y.dtype))
    return lambda y: RE.ENERGIES[model](y, **p)


@section
def ebm_chains_deterministic():
    reseed(7)
    opts = [(0, None), (1, 0.8), (3, (-0.5, None)), (7, None), (2, (None, 0.3))]
    Ds = [1, 2, 3, 15, 16, 17, 31, 32, 33, 63, 64, 65, 70, 129]
    for dt in [torch.float32, torch.float64]:
        rtol, atol = (1e-4, 1e-6) if dt == torch.float32 else (1e-9, 1e-12)
        for di, D in enumerate(Ds):
            B = [4, 1, 33, 257][di % 4]
            for model in CHAIN_MODELS:
                if model == "rosenbrock" and D < 2:
                    continue
                for oi, (thin, clamp) in enumerate(opts):
                    lay = ["contig", "t", "offset", "slice", "contig"][(oi + di) % 5]
                    p = chain_params(model, D, dt, lay)
                    x = place(randn(B, D, scale=0.6, dtype=dt), lay)
                    sc = ref_score_fn(model, p)

                    def run():
                        out = ebm.langevin_chain(x, model, 6, 0.005, 0.0, thin=thin, clamp=clamp, generator=gen(1), **p)
                        ref = RE.langevin_chain(c64(x), sc, 6, 0.005, 0.0, thin=thin, clamp=clamp)
                        if not torch.isfinite(ref if not thin else ref[0]).all():
                            return "harness: reference chain diverged"
                        if thin:
                            m = compare(out[1], ref[1], rtol, atol, srel=0.1, dtype=dt)
                            if m:
                                return "trajectory: " + m
                            out, ref = out[0], ref[0]
                        return compare(out, rounded(ref, dt), rtol, atol, srel=0.1, dtype=dt)
                    check("ebm.langevin_chain", f"{model} {dt} B={B} D={D} thin={thin} clamp={clamp} x:{lay}", run)
            # n_steps = 0, thin > n_steps
            p = chain_params("harmonic", D, dt)
            x = place(randn(3, D, dtype=dt))
            check("ebm.langevin_chain", f"{dt} D={D} n_steps=0", lambda: compare(
                ebm.langevin_chain(x, "harmonic", 0, 0.01, **p), x, 0, 0) or compare(
                ebm.langevin_chain(x, "harmonic", 0, 0.01, thin=2, **p)[1], torch.empty(0, 3, D), 0, 0))
            check("ebm.langevin_chain", f"{dt} D={D} thin > n_steps", lambda: compare(
                ebm.langevin_chain(x, "harmonic", 3, 0.01, thin=5, **p)[1], torch.empty(0, 3, D), 0, 0))
            # rows are independent: a NaN / inf row does not leak
            for model in ["double_well", "gaussian"]:
                p = chain_params(model, D, dt)
                xs = randn(5, D)
                xs[1, 0], xs[3, -1] = NAN, INF
                xs = place(xs.to(dt))
                sc = ref_score_fn(model, p)
                check("ebm.langevin_chain", f"{model} {dt} D={D} NaN/inf rows", lambda: compare(
                    ebm.langevin_chain(xs, model, 4, 0.01, 0.0, **p),
                    rounded(RE.langevin_chain(c64(xs), sc, 4, 0.01, 0.0), dt), rtol, atol, srel=0.1,
                    skip_ref_nan=True))


def ula_gauss_moments(mu, P, x0, eta, n):
    """Exact mean and covariance after n ULA steps x <- x - eta*Ps(x-mu) + sqrt(2 eta) z, from x0."""
    Ps = 0.5 * (P + P.T)
    M = torch.eye(P.shape[0], dtype=torch.float64) - eta * Ps
    m = x0 - mu
    C = torch.zeros_like(P)
    for _ in range(n):
        m = M @ m
        C = M @ C @ M.T + 2 * eta * torch.eye(P.shape[0], dtype=torch.float64)
    return mu + m, C


@section
def ebm_chains_random():
    reseed(8)
    # (a) Langevin on a Gaussian: exact mean / covariance after n steps
    for dt in [torch.float32, torch.float64]:
        for D in [1, 2, 5, 17, 33, 64, 65, 70]:
            def run(dt=dt, D=D):
                mu, P = gauss_params(D, dt)
                mu, P = mu.to(dt).double(), P.to(dt).double()
                Bn, n, eta = 4000, 60, 0.05
                out = ebm.langevin_chain(place(torch.zeros(Bn, D, dtype=dt)), "gaussian", n, eta,
                                         mean=place(mu.to(dt)), precision=place(P.to(dt)), generator=gen(D))
                s = out.double().cpu()
                if not torch.isfinite(s).all():
                    return "non-finite samples"
                em, C = ula_gauss_moments(mu, P, torch.zeros(D, dtype=torch.float64), eta, n)
                var = C.diag()
                m1 = ztest("mean", s.mean(0), em, (var / Bn).sqrt())
                sc = torch.cov(s.T).reshape(D, D) if D > 1 else s.var(0).reshape(1, 1)
                se = ((var[:, None] * var[None, :] + C * C) / Bn).sqrt()
                m2 = ztest("cov", sc, C, se)
                return "; ".join(x for x in (m1, m2) if x)
            check("ebm.langevin_chain", f"gaussian {dt} D={D} exact ULA moments", run)
    # (b) determinism
    for dt in [torch.float32, torch.float64]:
        for model, D in [("rastrigin", 3), ("gaussian", 40), ("double_well", 100)]:
            def run(dt=dt, model=model, D=D):
                p = chain_params(model, D, dt)
                x = place(randn(64, D, dtype=dt))
                torch.manual_seed(5); a = ebm.langevin_chain(x, model, 20, 0.01, **p)
                torch.manual_seed(5); b = ebm.langevin_chain(x, model, 20, 0.01, **p)
                c = ebm.langevin_chain(x, model, 20, 0.01, generator=gen(9), thin=5, **p)
                c2 = ebm.langevin_chain(x, model, 20, 0.01, generator=gen(9), **p)
                d = ebm.langevin_chain(x, model, 20, 0.01, generator=gen(10), **p)
                h = ebm.hmc_chain(x, model, 10, 0.05, 3, generator=gen(9), **p)
                h2 = ebm.hmc_chain(x, model, 10, 0.05, 3, generator=gen(9), thin=5, **p)
                m = []
                if not torch.equal(a, b): m.append("langevin manual_seed not reproducible")
                if not torch.equal(c[0], c2): m.append("langevin generator not reproducible (thin=5 vs 0)")
                if c[1].shape != (4, 64, D) or not torch.equal(c[1][-1], c[0]): m.append("trajectory[-1] != x")
                if torch.equal(c2, d): m.append("langevin: different seeds equal")
                if not (torch.equal(h[0], h2[0]) and torch.equal(h[1], h2[1])): m.append("hmc generator not reproducible (thin=5 vs 0)")
                if h2[2].shape != (2, 64, D) or not torch.equal(h2[2][-1], h2[0]): m.append("hmc trajectory[-1] != x")
                acc = h[1].double().cpu() * 10
                if not torch.allclose(acc, acc.round(), atol=1e-4) or (h[1] < 0).any() or (h[1] > 1).any():
                    m.append("hmc accept_rate not a fraction k/n_steps")
                for t in (a, c2, h[0]):
                    if not torch.isfinite(t).all(): m.append("non-finite samples")
                    if t.dtype != dt: m.append(f"dtype {t.dtype}")
                return "; ".join(m)
            check("ebm.langevin_chain/hmc_chain", f"{model} {dt} D={D} determinism", run)
    # (c) op vs reference in law (same start, same n_steps)
    cases = [("double_well", 2, dict(barrier_height=0.5)), ("harmonic", 3, dict(k=4.0)), ("rosenbrock", 2, dict(a=1.0, b=2.0)),
             ("rastrigin", 2, dict(a=1.0)), ("ackley", 3, {}), ("double_well", 33, dict(barrier_height=0.5)),
             ("harmonic", 65, dict(k=2.0)), ("rastrigin", 17, dict(a=1.0)), ("gaussian", 3, None), ("gaussian", 33, None),
             ("gaussian", 65, None), ("gaussian", 16, None), ("double_well", 32, dict(barrier_height=0.5)),
             ("ackley", 64, {})]
    for dt in [torch.float32, torch.float64]:
        for model, D, p in cases:
            Bn = 12000 if D <= 3 else 3000
            def run_l(dt=dt, model=model, D=D, p=p, Bn=Bn):
                if p is None:
                    p = chain_params("gaussian", D, dt)
                x0 = randn(1, D, scale=0.5).expand(Bn, D).to(dt)
                clamp = (-1.5, 1.2) if model == "double_well" else None
                out = ebm.langevin_chain(place(x0), model, 40, 0.01, clamp=clamp, generator=gen(1), **p)
                torch.manual_seed(1234)
                ref = RE.langevin_chain(x0.double(), ref_score_fn(model, {k: v for k, v in p.items()}), 40, 0.01, clamp=clamp)
                return two_sample("langevin", out, ref)
            check("ebm.langevin_chain", f"{model} {dt} D={D} in law vs reference", run_l)

            def run_h(dt=dt, model=model, D=D, p=p, Bn=Bn):
                if p is None:
                    p = chain_params("gaussian", D, dt)
                x0 = randn(1, D, scale=0.5).expand(Bn, D).to(dt)
                eps = 0.1 if D <= 3 else 0.05
                out, acc = ebm.hmc_chain(place(x0), model, 15, eps, 5, generator=gen(2), **p)
                torch.manual_seed(4321)
                ref, racc = RE.hmc_chain(x0.double(), ref_energy_fn(model, p), ref_score_fn(model, p), 15, eps, 5)
                m = two_sample("hmc x", out, ref)
                m2 = two_sample("hmc accept rate", acc[:, None], racc[:, None])
                return "; ".join(s for s in (m, m2) if s)
            check("ebm.hmc_chain", f"{model} {dt} D={D} in law vs reference", run_h)


# ----------------------------------------------------------------------------------------- sampling.normal

PHI = lambda q: 0.5 * (1 + math.erf(q / math.sqrt(2)))  # noqa: E731


@section
def sampling_normal():
    reseed(9)
    shapes = [(200001, 1), (50000, 3), (3000, 65), (7, 1031), (0, 5), (5, 0), (1, 1)]
    for md in DT4:
        for oi, od in enumerate([None] + DT4):
            for si, (n, d) in enumerate(shapes):
                if (oi + si) % 2 and n * d > 100000:
                    continue  # the big shapes for half of the dtype pairs
                mean = place((randn(d) * 3).to(md))
                std = place((rand(d) + 0.5).to(md))

                def run(n=n, d=d, mean=mean, std=std, od=od):
                    torch.manual_seed(5); a = sampling.normal(mean, std, n, dtype=od)
                    torch.manual_seed(5); a2 = sampling.normal(mean, std, n, dtype=od)
                    g1 = sampling.normal(mean, std, n, dtype=od, generator=gen(7))
                    g2 = sampling.normal(mean, std, n, dtype=od, generator=gen(7))
                    m = []
                    if a.shape != (n, d): return f"shape {tuple(a.shape)}"
                    if a.dtype != (od or md): return f"dtype {a.dtype} expected {od or md}"
                    if a.device.type != DEV.type: return f"device {a.device}"
                    if not torch.equal(a, a2): m.append("manual_seed not reproducible")
                    if not torch.equal(g1, g2): m.append("generator not reproducible")
                    if n * d == 0: return "; ".join(m)
                    if not torch.isfinite(a).all(): m.append(f"non-finite samples ({int((~torch.isfinite(a)).sum())})")
                    if n * d < 1000: return "; ".join(m)
                    outd = od or md
                    z = ((a.double() - mean.double()) / std.double()).cpu()
                    N = z.numel()
                    half = outd in HALF
                    slack = 0.004 if half else 0.0
                    m.append(ztest("z mean", z.mean(), 0, 1 / N ** 0.5, slack=slack))
                    m.append(ztest("z std", z.std(), 1, (0.5 / N) ** 0.5, slack=3 * slack))
                    zf = z.reshape(-1)
                    m.append(ztest("lag-1 corr (flat)", torch.corrcoef(torch.stack([zf[:-1], zf[1:]]))[0, 1], 0, 1 / N ** 0.5))
                    if n > 1:
                        m.append(ztest("row-to-row corr", torch.corrcoef(torch.stack([z[:-1].reshape(-1), z[1:].reshape(-1)]))[0, 1],
                                       0, 1 / (N - d) ** 0.5))
                    for q in [-3.0, -1.0, 0.0, 0.5, 2.0, 3.0]:
                        pq = PHI(q)
                        m.append(ztest(f"P(z<{q})", (z < q).double().mean(), pq, (pq * (1 - pq) / N) ** 0.5,
                                       slack=0.004 if half else 0))
                    if n >= 1000:
                        m.append(ztest("column means", z.mean(0), torch.zeros(d), torch.full((d,), 1 / n ** 0.5),
                                       slack=slack))
                        m.append(ztest("column stds", z.std(0), torch.ones(d), torch.full((d,), (0.5 / n) ** 0.5),
                                       slack=3 * slack))
                    if half and outd == torch.float16 and md != torch.float64:
                        # |z| < 4.86 for 16-bit uniforms (allow the output rounding)
                        zz = (a.float().cpu() - mean.float().cpu()) / std.float().cpu()
                        lim = 4.86 + (mean.float().abs().cpu() / std.float().cpu() + 4.86) * 2 ** -10 + 0.01
                        if (zz.abs() > lim).any(): m.append(f"float16 output |z| {zz.abs().max().item():.3f} above 4.86")
                    return "; ".join(s for s in m if s)
                check("sampling.normal", f"mean {md} -> {od} n={n} d={d}", run)
    # out=, layouts, degenerate parameters
    for md in [torch.float32, torch.float64, torch.float16]:
        def out_case(md=md):
            mean, std = place(randn(7, dtype=md)), place(rand(7, dtype=md) + 0.5)
            out = torch.empty(5000, 7, dtype=md, device=DEV)
            r = sampling.normal(mean, std, 5000, out=out, generator=gen(3))
            r2 = sampling.normal(mean, std, 5000, generator=gen(3))
            m = []
            if r.data_ptr() != out.data_ptr(): m.append("out= not returned")
            if not torch.equal(out, r2): m.append("out= differs from a fresh draw of the same generator")
            return "; ".join(m)
        check("sampling.normal", f"{md} out=", out_case)
        expect_raise("sampling.normal", f"{md} out= overlapping mean",
                     lambda: (lambda o: sampling.normal(o[0], torch.ones(4, dtype=md, device=DEV), 10, out=o))(
                         torch.zeros(10, 4, dtype=md, device=DEV)), (ValueError, RuntimeError))

        def layouts(md=md):
            m = []
            for lm, ls in [("slice", "offset"), ("offset", "expand"), ("contig", "slice")]:
                mean = place(randn(33, dtype=md), lm)
                std = place(rand(33, dtype=md) + 0.5, ls) if ls != "expand" else place(torch.full((1,), 1.5, dtype=md)).expand(33)
                a = sampling.normal(mean, std, 4000, generator=gen(8))
                b = sampling.normal(mean.contiguous(), std.contiguous(), 4000, generator=gen(8))
                if not torch.equal(a, b): m.append(f"mean:{lm} std:{ls} differs from contiguous inputs")
            return "; ".join(m)
        check("sampling.normal", f"{md} non-contiguous mean/std", layouts)

        def degenerate(md=md):
            mean = place(torch.tensor([1.0, NAN, 2.0, 0.0, -3.0], dtype=md))
            std = place(torch.tensor([0.0, 1.0, INF, 1e-30, 1.0], dtype=md))
            a = sampling.normal(mean, std, 2000, generator=gen(2)).double().cpu()
            m = []
            if not (a[:, 0] == 1.0).all(): m.append("std=0 column != mean")
            if not torch.isnan(a[:, 1]).all(): m.append("NaN mean column not all NaN")
            if torch.isfinite(a[:, 2]).any(): m.append("inf std column has finite values")
            if not torch.isfinite(a[:, 3]).all() or (a[:, 3].abs() > 1e-28).any(): m.append("std=1e-30 column wrong")
            return "; ".join(m)
        check("sampling.normal", f"{md} std 0 / NaN mean / inf std", degenerate)
    if IS_CUDA:
        def neg():
            a = sampling.normal(place(torch.zeros(3)), place(torch.tensor([1.0, -1.0, 1.0])), 100, generator=gen(1)).cpu()
            m = []
            if not torch.isnan(a[:, 1]).all(): m.append("negative-std column not NaN on CUDA")
            if not torch.isfinite(a[:, [0, 2]]).all(): m.append("other columns not finite")
            return "; ".join(m)
        check("sampling.normal", "negative std (CUDA: NaN column)", neg)
    else:
        expect_raise("sampling.normal", "negative std (CPU: raises)",
                     lambda: sampling.normal(torch.zeros(3), torch.tensor([1.0, -1.0, 1.0]), 10))


# ----------------------------------------------------------------------------------------- CEM

def ref_cem(samples, scores, k, mean, std, **kw):
    """Candidates: the reference on float64 copies, and on the op's own inputs (its accumulation dtype)."""
    return [lambda: RS.cem_update(c64(samples), c64(scores), k, c64(mean), c64(std), **kw),
            lambda: RS.cem_update(*(t.detach().cpu() for t in (samples, scores)), k,
                                  *(t.detach().cpu() for t in (mean, std)), **kw)]


def cem_compare(out, refs, dt):
    rtol, atol = (1e-5, 1e-6) if dt == torch.float32 else TOL[dt]
    first = None
    for r in refs:
        r = r()
        m1 = compare(out[0], rounded(r[0], dt), rtol, atol, srel=0.1, dtype=dt)
        m2 = compare(out[1], rounded(r[1], dt), rtol, atol, srel=0.1, dtype=dt)
        msg = "; ".join(f"{n}: {m}" for n, m in (("mean", m1), ("std", m2)) if m)
        if not msg:
            return None
        first = first or msg
    return first


@section
def sampling_cem_update():
    reseed(10)
    kws = [dict(), dict(maximize=True), dict(smoothing=0.3), dict(min_std=0.5), dict(smoothing=1.0),
           dict(smoothing=0.7, min_std=0.2, maximize=True)]
    for sd in DT4:
        for scd in DT4:
            for si, (n, d) in enumerate([(1, 1), (7, 3), (100, 5), (33, 0), (1000, 17), (4097, 65)]):
                x = place(randn(n, d, dtype=sd))
                sc = place(randn(n, dtype=scd))
                mean, std = place(randn(d, dtype=sd)), place(rand(d, dtype=sd))
                for ki, k in enumerate(sorted({1, max(1, n // 3), n})):
                    kw = kws[(si + ki + DT4.index(scd)) % len(kws)]
                    check("sampling.cem_update", f"{sd}/{scd} n={n} d={d} k={k} {kw}",
                          lambda: cem_compare(sampling.cem_update(x, sc, k, mean, std, **kw),
                                              ref_cem(x, sc, k, mean, std, **kw), sd))
                # ties, -0.0 vs 0.0, NaN and inf scores
                sc2 = torch.randint(0, 3, (n,), generator=RNG).to(torch.float64)
                if n > 4:
                    sc2[1], sc2[2], sc2[0] = NAN, -0.0, 0.0
                sc3 = randn(n)
                if n > 4:
                    sc3[0], sc3[1], sc3[3] = INF, -INF, NAN
                for tag, s in [("ties/NaN", sc2), ("inf/NaN", sc3)]:
                    s = place(s.to(scd))
                    for k in sorted({1, 2 if n >= 2 else 1, max(1, n // 2), n}):
                        for mx in [False, True]:
                            check("sampling.cem_update", f"{sd}/{scd} n={n} d={d} k={k} {tag} maximize={mx}",
                                  lambda: cem_compare(sampling.cem_update(x, s, k, mean, std, maximize=mx),
                                                      ref_cem(x, s, k, mean, std, maximize=mx), sd))
    # large populations (multi-block selection on the GPU), many ties
    for n, d, k in [(100003, 3, 1000), (65537, 8, 1), (20000, 33, 19999), (50000, 2, 25000)]:
        for dt in [torch.float32, torch.float64]:
            x = place(randn(n, d, dtype=dt))
            for tag, s in [("random", randn(n)), ("ties", torch.randint(0, 50, (n,), generator=RNG).double())]:
                s = place(s.to(dt))
                for mx in [False, True]:
                    check("sampling.cem_update", f"{dt} n={n} d={d} k={k} {tag} maximize={mx}",
                          lambda: cem_compare(sampling.cem_update(x, s, k, x[0], x[1].abs(), maximize=mx, smoothing=0.1),
                                              ref_cem(x, s, k, x[0], x[1].abs(), maximize=mx, smoothing=0.1), dt))
    # layouts and special values
    for dt in [torch.float32, torch.float64, torch.bfloat16]:
        x = place(randn(80, 5, dtype=dt), "t")
        sc = place(randn(80, dtype=dt), "slice")
        mean = place(randn(5, dtype=dt), "offset")
        std = place(torch.full((1,), 0.7, dtype=dt)).expand(5)
        check("sampling.cem_update", f"{dt} non-contiguous inputs",
              lambda: cem_compare(sampling.cem_update(x, sc, 10, mean, std, smoothing=0.2),
                                  ref_cem(x, sc, 10, mean, std, smoothing=0.2), dt))
        for tag, xs in [("huge samples", randn(50, 3) * 1e30), ("NaN/inf samples", randn(50, 3)),
                        ("tiny samples", randn(50, 3) * 1e-30)]:
            if tag.startswith("NaN"):
                xs[3, 1], xs[5, 2] = NAN, INF
            xs = place(xs.to(dt))
            s = place(randn(50, dtype=dt))
            z3, o3 = place(torch.zeros(3, dtype=dt)), place(torch.ones(3, dtype=dt))
            for k in [10, 50]:
                check("sampling.cem_update", f"{dt} {tag} k={k}",
                      lambda: cem_compare(sampling.cem_update(xs, s, k, z3, o3), ref_cem(xs, s, k, z3, o3), dt))
        std = torch.ones(3); std[1] = NAN
        mean = torch.zeros(3); mean[2] = NAN
        std, mean = place(std.to(dt)), place(mean.to(dt))
        xs, s = place(randn(9, 3, dtype=dt)), place(randn(9, dtype=dt))
        for sm in [0.0, 0.5]:
            check("sampling.cem_update", f"{dt} NaN in mean/std smoothing={sm}",
                  lambda: cem_compare(sampling.cem_update(xs, s, 3, mean, std, smoothing=sm),
                                      ref_cem(xs, s, 3, mean, std, smoothing=sm), dt))


@section
def sampling_cem_minimize():
    target = [1.0, -2.0, 0.5]
    for mx in [False, True]:
        for dt in [torch.float32, torch.float64, torch.float16, torch.bfloat16]:
            for kw in [{}, dict(smoothing=0.3, min_std=1e-3)]:
                def run(mx=mx, dt=dt, kw=kw):
                    tgt = place(torch.tensor(target))
                    sphere = lambda x: ((x.float() - tgt) ** 2).sum(-1)  # noqa: E731
                    f = (lambda x: -sphere(x)) if mx else sphere
                    args = (f, place(torch.zeros(3, dtype=dt)), place(torch.ones(3, dtype=dt) * 2), 400, 40, 40)
                    r = sampling.cem_minimize(*args, maximize=mx, generator=gen(1), **kw)
                    r2 = sampling.cem_minimize(*args, maximize=mx, generator=gen(1), **kw)
                    m = []
                    if not all(torch.equal(a, b) for a, b in zip(r, r2)): m.append("not reproducible with a generator")
                    if r.history.shape != (40,): m.append(f"history shape {tuple(r.history.shape)}")
                    hb = r.history.max() if mx else r.history.min()
                    if not torch.equal(hb.float(), r.best_value.float()): m.append(f"best_value {r.best_value.item()} != best of history {hb.item()}")
                    fb = f(r.best_x[None])[0].item()
                    if abs(fb - r.best_value.item()) > 1e-3 * (1 + abs(fb)): m.append(f"f(best_x) {fb} != best_value {r.best_value.item()}")
                    tol = 0.05 if dt in HALF else 1e-2
                    if abs(r.best_value.item()) > tol: m.append(f"did not converge: best {r.best_value.item():.3g}")
                    if (r.mean.double().cpu() - torch.tensor(target, dtype=torch.float64)).abs().max() > tol * 5:
                        m.append(f"final mean {[round(v, 4) for v in r.mean.tolist()]} not near {target}")
                    if kw.get("min_std") and (r.std.double().cpu() < kw["min_std"] * (1 - 1e-2)).any(): m.append("std below min_std")
                    if r.mean.dtype != dt or r.mean.device.type != DEV.type: m.append(f"mean dtype/device {r.mean.dtype} {r.mean.device}")
                    return "; ".join(m)
                check("sampling.cem_minimize", f"shifted sphere {dt} maximize={mx} {kw}", run)
        # Rosenbrock: consistency only (CEM may stall in the valley)
        def rosen(mx=mx):
            f = (lambda x: -RS.rosenbrock(x.float())) if mx else (lambda x: RS.rosenbrock(x.float()))
            r = sampling.cem_minimize(f, place(torch.zeros(2)), place(torch.ones(2) * 2), 500, 50, 40, maximize=mx, generator=gen(3))
            m = []
            hb = r.history.max() if mx else r.history.min()
            if not torch.equal(hb, r.best_value): m.append("best_value != best of history")
            if abs(f(r.best_x[None])[0].item() - r.best_value.item()) > 1e-5: m.append("f(best_x) != best_value")
            if not torch.isfinite(r.history).all(): m.append("non-finite history")
            if abs(r.best_value.item()) > 0.5: m.append(f"best {r.best_value.item():.3g} far from 0")
            return "; ".join(m)
        check("sampling.cem_minimize", f"rosenbrock maximize={mx} consistency", rosen)

    def nan_obj():
        def g(x):
            v = RS.rastrigin(x.float()); v[::3] = NAN; return v
        r = sampling.cem_minimize(g, place(torch.ones(3) * 2), place(torch.ones(3) * 2), 300, 30, 30, generator=gen(2))
        m = []
        if torch.isnan(r.best_value) or torch.isnan(r.mean).any(): m.append("NaN in result")
        elif abs(g(r.best_x[None].repeat(2, 1))[1].item() - r.best_value.item()) > 1e-3: m.append("best_value != f(best_x)")
        return "; ".join(m)
    check("sampling.cem_minimize", "objective NaN on a third of the rows", nan_obj)


# ----------------------------------------------------------------------------------------- diffusion

def step_tol(dt):
    return (1e-5, 1e-6) if dt == torch.float32 else TOL[dt]


def ref_ddpm(m, t, x, S, z, **kw):
    return RD.ddpm_step(c64(m), c64(t), c64(x), c64(S), noise=c64(z), **kw)


def ref_ddim(m, t, tp, x, S, z, **kw):
    return RD.ddim_step(c64(m), c64(t), c64(tp), c64(x), c64(S), noise=c64(z), **kw)


def ref_cands_step(which, args, kw, dt):
    """float64 math (then rounded), and the reference on the op's own inputs (its compute dtype)."""
    f = RD.ddpm_step if which == "ddpm" else RD.ddim_step

    def r64():
        a = [c64(v) for v in args]
        return rounded(f(*a[:-1], noise=a[-1], **kw), dt)

    def rnat():
        a = [v.detach().cpu() if isinstance(v, torch.Tensor) else v for v in args]
        return f(*a[:-1], noise=a[-1], **kw)
    return [r64, rnat]


@section
def diffusion_schedule():
    for kind in ["linear", "scaled_linear", "squaredcos_cap_v2"]:
        for T in [1, 2, 50, 1000]:
            check("diffusion.ddpm_schedule", f"{kind} T={T}", lambda: compare(
                diffusion.ddpm_schedule(T, kind, device=DEV), RD.ddpm_schedule(T, kind), 1e-12, 1e-15,
                dtype=torch.float64))
        for bs, be in [(1e-4, 0.02), (0.5, 0.9), (0.02, 1e-4), (0.9, 0.999)]:
            if kind == "squaredcos_cap_v2":
                continue
            check("diffusion.ddpm_schedule", f"{kind} beta {bs}..{be}", lambda: compare(
                diffusion.ddpm_schedule(20, kind, bs, be, device=DEV), RD.ddpm_schedule(20, kind, bs, be), 1e-10, 1e-12))
    expect_raise("diffusion.ddpm_schedule", "unknown schedule", lambda: diffusion.ddpm_schedule(10, "cosine"))


@section
def diffusion_steps():
    reseed(11)
    scheds = {k: diffusion.ddpm_schedule(50, k, device=DEV) for k in ["linear", "scaled_linear", "squaredcos_cap_v2"]}
    kinds = list(scheds)
    shapes = [(3, 5), (2, 3, 7), (1, 1), (4, 1030), (2,), (0, 4), (3, 0), (5, 20011)]
    pts = ["epsilon", "v_prediction", "sample"]
    ci = 0
    for dt in DT4:
        rtol, atol = step_tol(dt)
        for shp in shapes:
            B = shp[0]
            m, x, z = (place(randn(*shp, dtype=dt)) for _ in range(3))
            tvs = [0, 1, 25, 49, place(torch.randint(0, 50, (B,), generator=RNG)),
                   place(torch.randint(0, 50, (B,), generator=RNG).int()), torch.tensor(17), place(torch.tensor(33))]
            for pt, clip, t in itertools.product(pts, [True, False], tvs):
                ci += 1
                kind = kinds[ci % 3]
                S = scheds[kind]
                rng = [1.0, 0.7, 1e-30, 1e30][ci % 4]
                kw = dict(prediction_type=pt, clip_sample=clip, clip_sample_range=rng)
                tt = t if isinstance(t, int) else f"tensor{list(t.shape)}{str(t.dtype)[6:]}:{t.device.type}"
                check("diffusion.ddpm_step", f"{dt} {shp} {kind} t={tt} {kw}",
                      lambda: compare(diffusion.ddpm_step(m, t, x, S, noise=z, **kw),
                                      ref_cands_step("ddpm", [m, t, x, S, z], kw, dt), rtol, atol, srel=0.1, dtype=dt))
        # DDIM: every option combination once per dtype, shapes cycled
        combos = list(itertools.product(pts, [True, False], [0.0, 0.5, 1.0], [True, False], [True, False],
                                        ["int", "row", "prev=-1", "prev=t-1"]))
        for i, (pt, clip, eta, sao, ucm, tk) in enumerate(combos * 2):
            shp = shapes[(i + 3 * (i >= len(combos))) % len(shapes)]
            B = shp[0]
            kind = kinds[i % 3]
            S = scheds[kind]
            m, x, z = (place(randn(*shp, dtype=dt)) for _ in range(3))
            if tk == "int":
                t, tp = [1, 25, 49, 10][i % 4], [0, 10, 48, -1][i % 4]
            elif tk == "row":
                tcpu = torch.randint(1, 50, (B,), generator=RNG)
                t, tp = place(tcpu), place(torch.clamp(tcpu - torch.randint(1, 20, (B,), generator=RNG), min=-1))
            elif tk == "prev=-1":
                t, tp = [0, 7, 49][i % 3], -1
            else:
                tcpu = torch.randint(0, 50, (B,), generator=RNG)
                t, tp = place(tcpu.int()), place((tcpu - 1).int())
            kw = dict(eta=eta, prediction_type=pt, clip_sample=clip, clip_sample_range=[1.0, 0.7][i % 2],
                      set_alpha_to_one=sao, use_clipped_model_output=ucm)
            check("diffusion.ddim_step", f"{dt} {shp} {kind} t={tk} {kw}",
                  lambda: compare(diffusion.ddim_step(m, t, tp, x, S, noise=z, **kw),
                                  ref_cands_step("ddim", [m, t, tp, x, S, z], kw, dt), rtol, atol, srel=0.1, dtype=dt))


DIFF_SPECIAL = [NAN, INF, -INF, 1e30, -1e30, 3e38, 1e-40, -0.0, 1e300]


@section
def diffusion_special_values():
    S = diffusion.ddpm_schedule(50, "linear", device=DEV)
    i = 0
    for dt in DT4:
        rtol, atol = step_tol(dt)
        for which, v in itertools.product(["m", "x", "z"], DIFF_SPECIAL):
            reseed(12)
            vals = {k: randn(2, 9) for k in "mxz"}
            vals[which][0, 3] = v
            vals[which][1, 8] = v
            m, x, z = (place(vals[k].to(dt)) for k in "mxz")
            for pt, clip, t in itertools.product(["epsilon", "v_prediction", "sample"], [True, False], [0, 1, 49]):
                kw = dict(prediction_type=pt, clip_sample=clip)
                check("diffusion.ddpm_step", f"{dt} {which}={v} t={t} {kw}",
                      lambda: compare(diffusion.ddpm_step(m, t, x, S, noise=z, **kw),
                                      ref_cands_step("ddpm", [m, t, x, S, z], kw, dt), rtol, atol, srel=0.1,
                                      skip_ref_nan=not math.isnan(v), dtype=dt))
                i += 1
                eta, ucm, sao = [(0.0, False, True), (1.0, True, False), (1.0, False, True), (0.0, True, True)][i % 4]
                for tp in [-1, 0]:
                    if tp >= t:
                        continue
                    kw2 = dict(kw, eta=eta, use_clipped_model_output=ucm, set_alpha_to_one=sao)
                    check("diffusion.ddim_step", f"{dt} {which}={v} t={t} tp={tp} {kw2}",
                          lambda: compare(diffusion.ddim_step(m, t, tp, x, S, noise=z, **kw2),
                                          ref_cands_step("ddim", [m, t, tp, x, S, z], kw2, dt), rtol, atol, srel=0.1,
                                          skip_ref_nan=not math.isnan(v), dtype=dt))


@section
def diffusion_layouts_and_timesteps():
    reseed(13)
    S = diffusion.ddpm_schedule(50, "linear", device=DEV)
    for dt in [torch.float32, torch.float16]:
        rtol, atol = step_tol(dt)
        for lm, lx, lz in [("t", "slice", "offset"), ("perm", "expand", "t"), ("offset", "offset", "expand"),
                           ("slice", "perm", "contig")]:
            m, x, z = (place(randn(6, 10, 8, dtype=dt), l) for l in (lm, lx, lz))
            tc = torch.randint(1, 50, (12,), generator=RNG)
            for tname, t in [("int", 5), ("sliced row tensor", place(tc)[::2]), ("int32", place(tc[:6].int())),
                             ("0-d", place(torch.tensor(7))), ("expanded", place(torch.tensor([7])).expand(6))]:
                tp = (torch.clamp(t - 3, min=-1) if isinstance(t, torch.Tensor) else 2)
                lab = f"{dt} m:{lm} x:{lx} z:{lz} t={tname}"
                check("diffusion.ddpm_step", lab, lambda: compare(
                    diffusion.ddpm_step(m, t, x, S, noise=z), ref_cands_step("ddpm", [m, t, x, S, z], {}, dt),
                    rtol, atol, srel=0.1, dtype=dt))
                for eta in [0.0, 0.7]:
                    check("diffusion.ddim_step", lab + f" eta={eta}", lambda: compare(
                        diffusion.ddim_step(m, t, tp, x, S, eta=eta, noise=z),
                        ref_cands_step("ddim", [m, t, tp, x, S, z], dict(eta=eta), dt), rtol, atol, srel=0.1, dtype=dt))
            r = diffusion.ddpm_step(m, 5, x, S, noise=z)
            check("diffusion.ddpm_step", f"{dt} output contiguous", lambda: None if r.is_contiguous() else "not contiguous")
    # non-contiguous schedule
    m, x, z = (place(randn(3, 4)) for _ in range(3))
    for name, S2 in [("column slice", torch.cat([S, S], 1)[:, :8]), ("transposed storage", S.t().contiguous().t())]:
        check("diffusion.ddpm_step", f"schedule {name}", lambda: compare(
            diffusion.ddpm_step(m, 9, x, S2, noise=z), RD.ddpm_step(c64(m), 9, c64(x), c64(S), noise=c64(z)), 1e-5, 1e-6))
        check("diffusion.ddim_step", f"schedule {name}", lambda: compare(
            diffusion.ddim_step(m, 9, 3, x, S2, eta=0.5, noise=z),
            RD.ddim_step(c64(m), 9, 3, c64(x), c64(S), eta=0.5, noise=c64(z)), 1e-5, 1e-6))
    # rows of a schedule: sliced (row 0 is the final step) and strided (strided inference): each steps from
    # row t to row t - 1 of the table given (the kernels read the posterior columns of row t until session 42)
    S50 = diffusion.ddpm_schedule(50, "squaredcos_cap_v2", device=DEV)
    for name, S3 in [("sliced [5:]", S50[5:]), ("strided [::5]", S50[::5]), ("strided [3::7]", S50[3::7])]:
        for t in [0, 1, S3.shape[0] - 1]:
            check("diffusion.ddpm_step", f"schedule {name} t={t}", lambda: compare(
                diffusion.ddpm_step(m, t, x, S3, noise=z), RD.ddpm_step(c64(m), t, c64(x), c64(S3), noise=c64(z)),
                1e-5, 1e-6))
            check("diffusion.ddim_step", f"schedule {name} t={t} -> {t - 1}", lambda: compare(
                diffusion.ddim_step(m, t, t - 1, x, S3, eta=0.5, noise=z),
                RD.ddim_step(c64(m), t, t - 1, c64(x), c64(S3), eta=0.5, noise=c64(z)), 1e-5, 1e-6))
    # T = 1 and T = 1000
    for kind in ["linear", "squaredcos_cap_v2"]:
        for T in [1, 1000]:
            S1 = diffusion.ddpm_schedule(T, kind, device=DEV)
            for t in sorted({0, T - 1}):
                check("diffusion.ddpm_step", f"{kind} T={T} t={t}", lambda: compare(
                    diffusion.ddpm_step(m, t, x, S1, noise=z), RD.ddpm_step(c64(m), t, c64(x), c64(S1), noise=c64(z)), 1e-5, 1e-6))
                check("diffusion.ddim_step", f"{kind} T={T} t={t} -> -1", lambda: compare(
                    diffusion.ddim_step(m, t, -1, x, S1, eta=1.0, noise=z),
                    RD.ddim_step(c64(m), t, -1, c64(x), c64(S1), eta=1.0, noise=c64(z)), 1e-5, 1e-6))
    # eta = 0: noise must be ignored (NaN noise must not leak)
    zn = place(torch.full((3, 4), NAN, dtype=torch.float64))
    check("diffusion.ddim_step", "eta=0 ignores noise", lambda: compare(
        diffusion.ddim_step(m, 9, 3, x, S, eta=0.0, noise=zn), RD.ddim_step(c64(m), 9, 3, c64(x), c64(S)), 1e-5, 1e-6))
    check("diffusion.ddpm_step", "t=0 adds no noise (NaN-free with finite noise)", lambda: compare(
        diffusion.ddpm_step(m, 0, x, S, noise=place(randn(3, 4) * 1e30)),
        RD.ddpm_step(c64(m), 0, c64(x), c64(S), noise=torch.zeros(3, 4, dtype=torch.float64)), 1e-5, 1e-6))
    # zero-size batches
    for shp in [(0, 4), (3, 0), (0,)]:
        m0, x0 = place(torch.zeros(shp)), place(torch.zeros(shp))
        check("diffusion.ddpm_step", f"zero-size {shp}", lambda: compare(
            diffusion.ddpm_step(m0, 3, x0, S, noise=m0), torch.zeros(shp), 0, 0))
        check("diffusion.ddim_step", f"zero-size {shp}", lambda: compare(
            diffusion.ddim_step(m0, 3, 1, x0, S, eta=1.0), torch.zeros(shp), 0, 0))
    # out-of-range timesteps
    m, x, z = (place(randn(4, 5)) for _ in range(3))
    expect_raise("diffusion.ddpm_step", "int t=50 out of range", lambda: diffusion.ddpm_step(m, 50, x, S, noise=z), (ValueError,))
    expect_raise("diffusion.ddpm_step", "int t=-1 out of range", lambda: diffusion.ddpm_step(m, -1, x, S, noise=z), (ValueError,))
    expect_raise("diffusion.ddim_step", "int t_prev=t", lambda: diffusion.ddim_step(m, 5, 5, x, S), (ValueError,))
    expect_raise("diffusion.ddim_step", "int t_prev=-2", lambda: diffusion.ddim_step(m, 5, -2, x, S), (ValueError,))
    tbad = torch.tensor([3, 50, -1, 10])
    if IS_CUDA:
        def gpu_oob():
            out = diffusion.ddpm_step(m, tbad.to(DEV), x, S, noise=z).cpu()
            out2 = diffusion.ddim_step(m, torch.tensor([3, 50, 5, 10], device=DEV), torch.tensor([1, 2, 5, -2], device=DEV), x, S, eta=0.5, noise=z).cpu()
            msgs = []
            if not torch.isnan(out[1:3]).all(): msgs.append("ddpm: rows with t outside [0, T) not NaN")
            r = RD.ddpm_step(c64(m)[[0, 3]], torch.tensor([3, 10]), c64(x)[[0, 3]], c64(S), noise=c64(z)[[0, 3]])
            if (mm := compare(out[[0, 3]].to(DEV), r, 1e-5, 1e-6)): msgs.append("ddpm valid rows: " + mm)
            if not torch.isnan(out2[1:4]).all(): msgs.append("ddim: rows with bad t / t_prev not NaN")
            r2 = RD.ddim_step(c64(m)[[0]], torch.tensor([3]), torch.tensor([1]), c64(x)[[0]], c64(S), eta=0.5, noise=c64(z)[[0]])
            if (mm := compare(out2[[0]].to(DEV), r2, 1e-5, 1e-6)): msgs.append("ddim valid row: " + mm)
            return "; ".join(msgs)
        check("diffusion.ddpm_step/ddim_step", "device t out of range -> NaN rows", gpu_oob)
    else:
        expect_raise("diffusion.ddpm_step", "CPU tensor t out of range", lambda: diffusion.ddpm_step(m, tbad, x, S, noise=z), (ValueError,))
    # autograd
    for dt in [torch.float64, torch.float32]:
        for pt in ["epsilon", "v_prediction", "sample"]:
            def run(dt=dt, pt=pt):
                m, x, z = (place(randn(3, 6, dtype=dt)).requires_grad_() for _ in range(3))
                w = place(randn(3, 6, dtype=dt))
                t, tp = place(torch.tensor([3, 20, 49])), place(torch.tensor([1, 0, -1]))
                msgs = []
                for name, fo, fr in [
                        ("ddpm", lambda a, b, c: diffusion.ddpm_step(a, t, b, S, noise=c, prediction_type=pt),
                         lambda a, b, c: RD.ddpm_step(a, t.cpu(), b, S.cpu(), noise=c, prediction_type=pt)),
                        ("ddim", lambda a, b, c: diffusion.ddim_step(a, t, tp, b, S, eta=0.6, noise=c, prediction_type=pt,
                                                                     use_clipped_model_output=True),
                         lambda a, b, c: RD.ddim_step(a, t.cpu(), tp.cpu(), b, S.cpu(), eta=0.6, noise=c, prediction_type=pt,
                                                      use_clipped_model_output=True))]:
                    g = torch.autograd.grad((fo(m, x, z) * w).sum(), (m, x, z))
                    ins = [c64(v).requires_grad_() for v in (m, x, z)]
                    gr = torch.autograd.grad((fr(*ins) * c64(w)).sum(), ins)
                    for n_, a, b in zip("model_output sample noise".split(), g, gr):
                        if (mm := compare(a, b, *TOL[dt], srel=0.1)):
                            msgs.append(f"{name} grad {n_}: {mm}")
                return "; ".join(msgs)
            check("diffusion.ddpm_step/ddim_step", f"{dt} {pt} backward", run)


@section
def diffusion_random_noise():
    S = diffusion.ddpm_schedule(50, "linear", device=DEV)
    for dt in [torch.float32, torch.float64, torch.bfloat16]:
        for shp, t in [((4, 100003), 10), ((50001, 7), "rows"), ((3, 5), 0)]:
            def run(dt=dt, shp=shp, t=t):
                reseed(14)
                m, x = place(randn(*shp, dtype=dt)), place(randn(*shp, dtype=dt))
                lo = 10 if dt in HALF else 1  # tiny posterior std at t = 1 is below a half type's rounding
                tt = place(torch.randint(lo, 50, (shp[0],), generator=RNG)) if t == "rows" else t
                torch.manual_seed(1); a = diffusion.ddpm_step(m, tt, x, S)
                torch.manual_seed(1); a2 = diffusion.ddpm_step(m, tt, x, S)
                msgs = []
                if not torch.equal(a, a2): msgs.append("not reproducible under manual_seed")
                det = RD.ddpm_step(c64(m), c64(tt), c64(x), c64(S), noise=torch.zeros(shp, dtype=torch.float64))
                if t == 0:
                    return "; ".join(msgs) or compare(a, rounded(det, dt), *step_tol(dt), srel=0.1)
                std = c64(S)[torch.as_tensor(c64(tt)), 7]
                std = std[:, None] if std.dim() == 1 else std
                zz = ((a.double().cpu() - det) / std).reshape(-1)
                N = zz.numel()
                slack = 0.03 if dt in HALF else 0
                for s in (ztest("z mean", zz.mean(), 0, 1 / N ** 0.5, slack=slack), ztest("z std", zz.std(), 1, (0.5 / N) ** 0.5, slack=slack),
                          ztest("lag-1 corr", torch.corrcoef(torch.stack([zz[:-1], zz[1:]]))[0, 1], 0, 1 / N ** 0.5)):
                    if s: msgs.append(s)
                return "; ".join(msgs)
            check("diffusion.ddpm_step", f"{dt} {shp} t={t} drawn noise", run)

        def ddim(dt=dt):
            reseed(15)
            m, x = place(randn(8, 20001, dtype=dt)), place(randn(8, 20001, dtype=dt))
            a = diffusion.ddim_step(m, 30, 20, x, S, eta=1.0, generator=None) if False else diffusion.ddim_step(m, 30, 20, x, S, eta=1.0)
            det = RD.ddim_step(c64(m), 30, 20, c64(x), c64(S), eta=1.0, noise=torch.zeros(8, 20001, dtype=torch.float64))
            ac = c64(S)[:, 1]
            at, ap = ac[30], ac[20]
            sd = ((1 - ap) / (1 - at) * (1 - at / ap)).sqrt()
            zz = ((a.double().cpu() - det) / sd).reshape(-1)
            N = zz.numel()
            slack = 0.05 if dt in HALF else 0
            return "; ".join(s for s in (ztest("z mean", zz.mean(), 0, 1 / N ** 0.5, slack=slack),
                                         ztest("z std", zz.std(), 1, (0.5 / N) ** 0.5, slack=slack)) if s)
        check("diffusion.ddim_step", f"{dt} eta=1 drawn noise", ddim)


# ----------------------------------------------------------------------------------------- conv1d_gn_mish

def _group_norm(h, G, gw, gb, eps):
    """F.group_norm's formula, also for groups of one value (F.group_norm refuses those)."""
    B, C = h.shape[:2]
    hg = h.reshape(B, G, -1)
    mean = hg.mean(-1, keepdim=True)
    var = hg.var(-1, unbiased=False, keepdim=True)
    y = ((hg - mean) / torch.sqrt(var + eps)).reshape(h.shape)
    return y * gw.view(1, C, *([1] * (h.dim() - 2))) + gb.view(1, C, *([1] * (h.dim() - 2)))


def ref_conv(x, w, b, gw, gb, G, pad, eps, round_conv=None, manual=False):
    if not manual and round_conv is None:
        return RD.conv1d_gn_mish(x, w, b, gw, gb, G, pad, eps)
    if pad is None:
        pad = w.shape[-1] // 2
    h = Fnn.conv1d(x, w, b, padding=pad)
    if round_conv is not None:
        h = h.to(round_conv).to(x.dtype)
    return Fnn.mish(_group_norm(h, G, gw, gb, eps))


def conv_cands(args, dt):
    c = [lambda: rounded(ref_conv(*[c64(a) for a in args[:5]], *args[5:]), dt),
         lambda: rounded(ref_conv(*[c64(a) for a in args[:5]], *args[5:], manual=True), dt)]
    if dt in HALF:  # the convolution's output rounded to the half type before the GroupNorm
        c.append(lambda: rounded(ref_conv(*[c64(a) for a in args[:5]], *args[5:], round_conv=dt), dt))
    if dt != torch.float64:
        c.append(lambda: rounded(ref_conv(*[cnat(a) for a in args[:5]], *args[5:]), dt))
    return c


def conv_tol(dt):
    return TOL[dt] if dt in HALF else ((1e-4, 1e-5) if dt == torch.float32 else (1e-9, 1e-12))


@section
def diffusion_conv1d_gn_mish():
    reseed(16)
    cfgs = [(2, 3, 8, 16, 3, 4, None), (1, 1, 1, 1, 1, 1, None), (3, 5, 6, 9, 5, 3, None), (2, 4, 4, 10, 4, 2, 1),
            (2, 4, 4, 10, 4, 2, 0), (1, 2, 64, 257, 7, 8, None), (0, 2, 4, 5, 3, 2, None), (2, 2, 4, 1, 3, 4, None),
            (2, 3, 6, 5, 3, 6, 5), (4, 32, 256, 33, 3, 1, None), (2, 16, 512, 16, 5, 8, None), (2, 8, 16, 40, 9, 4, None),
            (64, 64, 64, 256, 5, 8, None), (16, 128, 256, 64, 3, 32, None), (1, 7, 130, 65, 7, 2, None),
            (2, 8, 128, 32, 3, 1, None), (2, 8, 258, 32, 3, 2, None), (2, 4, 8, 20, 8, 2, 3), (3, 5, 12, 7, 7, 3, 6)]
    for dt in DT4:
        rtol, atol = conv_tol(dt)
        for ci, (B, Ci, Co, L, K, G, pad) in enumerate(cfgs):
            x, w = place(randn(B, Ci, L, dtype=dt)), place(randn(Co, Ci, K, scale=1 / math.sqrt(Ci * K), dtype=dt))
            bias, gw, gb = place(randn(Co, dtype=dt)), place(randn(Co, dtype=dt)), place(randn(Co, dtype=dt))
            for bi, bb in enumerate([bias, None]):
                for eps in ([1e-5, 0.0, 1.0] if bi == 0 else [1e-5]):
                    if B * L * Co > 300000 and eps != 1e-5:
                        continue
                    args = [x, w, bb, gw, gb, G, pad, eps]
                    check("diffusion.conv1d_gn_mish", f"{dt} (B,Ci,Co,L,K,G,pad)={(B, Ci, Co, L, K, G, pad)} bias={bb is not None} eps={eps}",
                          lambda: compare(diffusion.conv1d_gn_mish(*args), conv_cands(args, dt), rtol, atol, srel=0.1,
                                          skip_ref_nan=eps == 0.0, dtype=dt))
        # layouts
        x = place(randn(2, 3, 12, dtype=dt), "t")
        w = place(randn(6, 3, 3, dtype=dt), "perm")
        gw = place(randn(6, dtype=dt), "slice")
        gb = place(torch.full((1,), 0.3, dtype=dt)).expand(6)
        bias = place(randn(6, dtype=dt), "offset")
        for xl in ["t", "offset", "slice"]:
            xx = place(randn(2, 3, 12, dtype=dt), xl)
            args = [xx, w, bias, gw, gb, 3, None, 1e-5]
            check("diffusion.conv1d_gn_mish", f"{dt} layouts x:{xl} w:perm gw:slice gb:expand bias:offset",
                  lambda: compare(diffusion.conv1d_gn_mish(*args), conv_cands(args, dt), rtol, atol, srel=0.1, dtype=dt))
        # mish range: large |h|
        x = place(randn(1, 2, 50, dtype=dt))
        w = place(randn(4, 2, 3, dtype=dt))
        gw, gb = place(torch.tensor([100., -100., 30., 1e4]).to(dt)), place(torch.tensor([0., 5., -90., 20.]).to(dt))
        args = [x, w, None, gw, gb, 2, None, 1e-5]
        check("diffusion.conv1d_gn_mish", f"{dt} mish at large |h|",
              lambda: compare(diffusion.conv1d_gn_mish(*args), conv_cands(args, dt), max(rtol, 1e-3), atol, srel=0.0, dtype=dt))
        # even K with padding=None must raise
        expect_raise("diffusion.conv1d_gn_mish", f"{dt} even K, padding=None", lambda: diffusion.conv1d_gn_mish(
            place(randn(1, 2, 8, dtype=dt)), place(randn(4, 2, 4, dtype=dt)), None, place(torch.ones(4, dtype=dt)),
            place(torch.zeros(4, dtype=dt)), 2))
    # special values
    for dt in [torch.float32, torch.float64, torch.float16]:
        rtol, atol = conv_tol(dt)
        for v in [NAN, INF, -INF, 1e30, 1e-40, 3e38]:
            for where in ["x", "gw", "gb", "w", "bias"]:
                x, w = randn(2, 3, 9), randn(4, 3, 3)
                gw, gb, bias = torch.ones(4), torch.zeros(4), randn(4)
                {"x": x[0, 1], "w": w[1, 0], "gw": gw, "gb": gb, "bias": bias}[where][1] = v
                args = [place(x.to(dt)), place(w.to(dt)), place(bias.to(dt)), place(gw.to(dt)), place(gb.to(dt)), 2, None, 1e-5]
                check("diffusion.conv1d_gn_mish", f"{dt} {where}={v}",
                      lambda: compare(diffusion.conv1d_gn_mish(*args), conv_cands(args, dt), max(rtol, 1e-3), atol,
                                      srel=0.1, skip_ref_nan=not math.isnan(v), dtype=dt))
    # TF32 allowed (cuDNN path): a TF32 tolerance
    if IS_CUDA:
        torch.backends.cudnn.allow_tf32 = True
        try:
            args = [place(randn(64, 64, 256, dtype=torch.float32)), place(randn(64, 64, 5, scale=0.05, dtype=torch.float32)),
                    place(randn(64, dtype=torch.float32)), place(randn(64, dtype=torch.float32)), place(randn(64, dtype=torch.float32)),
                    8, None, 1e-5]
            check("diffusion.conv1d_gn_mish", "float32 large, cudnn.allow_tf32=True (tol 5e-3)",
                  lambda: compare(diffusion.conv1d_gn_mish(*args), conv_cands(args, torch.float32), 5e-3, 1e-3, srel=0.1))
        finally:
            torch.backends.cudnn.allow_tf32 = False
    # autograd
    for dt in [torch.float64, torch.float32]:
        for cfg in [(2, 3, 8, 16, 3, 4, None), (2, 16, 256, 40, 5, 2, None)]:
            def run(dt=dt, cfg=cfg):
                B, Ci, Co, L, K, G, pad = cfg
                ins = [place(randn(B, Ci, L, dtype=dt)), place(randn(Co, Ci, K, scale=1 / math.sqrt(Ci * K), dtype=dt)),
                       place(randn(Co, dtype=dt)), place(randn(Co, dtype=dt)), place(randn(Co, dtype=dt))]
                ins = [t.requires_grad_() for t in ins]
                w = place(randn(B, Co, L, dtype=dt))
                g = torch.autograd.grad((diffusion.conv1d_gn_mish(*ins, G, pad) * w).sum(), ins)
                ri = [c64(t).requires_grad_() for t in ins]
                gr = torch.autograd.grad((ref_conv(*ri, G, pad, 1e-5) * c64(w)).sum(), ri)
                tol = (1e-3, 1e-5) if dt == torch.float32 else (1e-8, 1e-10)
                return "; ".join(f"grad {n}: {m}" for n, a, b in zip("x weight bias gn_weight gn_bias".split(), g, gr)
                                 if (m := compare(a, b, *tol, srel=0.1)))
            check("diffusion.conv1d_gn_mish", f"{dt} {cfg} backward", run)


# ----------------------------------------------------------------------------------------- linalg

@section
def linalg_kron():
    reseed(17)
    pairs = [((2, 3), (4, 5)), ((1, 1), (1, 1)), ((0, 3), (2, 2)), ((3, 0), (2, 2)), ((2, 2), (0, 0)),
             ((5, 2, 3), (5, 1, 7)), ((2, 3, 1, 4), (2, 3, 3, 1)), ((4, 65), (3, 257)), ((33, 17), (31, 9)),
             ((64, 3, 5), (64, 7, 2))]
    for dt in DT4:
        rtol, atol = TOL[dt]
        for sa, sb in pairs:
            for la, lb in [("contig", "contig"), ("t", "slice"), ("offset", "t"), ("expand", "offset")]:
                A, B = place(randn(*sa, dtype=dt), la), place(randn(*sb, dtype=dt), lb)
                check("linalg.kron", f"{dt} {sa} x {sb} A:{la} B:{lb}",
                      lambda: compare(linalg.kron(A, B), cands(RL.kron, [A, B], dt), rtol, atol, srel=0.0, dtype=dt))
        A = place(torch.tensor([[NAN, 0.], [INF, 1e30]]).to(dt))
        B = place(torch.tensor([[0., 1e30], [2., -0.0]]).to(dt))
        check("linalg.kron", f"{dt} special values", lambda: compare(
            linalg.kron(A, B), cands(RL.kron, [A, B], dt), rtol, atol, srel=0.0, skip_ref_nan=True, dtype=dt))
    for dt in HALF:
        A = place(torch.tensor([[300., 1e-4]]).to(dt))
        check("linalg.kron", f"{dt} overflow", lambda: compare(linalg.kron(A, A), cands(RL.kron, [A, A], dt), *TOL[dt], dtype=dt))
    for dt in [torch.float64, torch.float32]:
        def run(dt=dt):
            A = place(randn(3, 4, 2, dtype=dt)).requires_grad_()
            B = place(randn(3, 3, 5, dtype=dt)).requires_grad_()
            w = place(randn(3, 12, 10, dtype=dt))
            g = torch.autograd.grad((linalg.kron(A, B) * w).sum(), (A, B))
            Ar, Br = c64(A).requires_grad_(), c64(B).requires_grad_()
            gr = torch.autograd.grad((RL.kron(Ar, Br) * c64(w)).sum(), (Ar, Br))
            return "; ".join(m for a, b in zip(g, gr) if (m := compare(a, b, *TOL[dt], srel=0.1)))
        check("linalg.kron", f"{dt} backward", run)


@section
def linalg_per_sample_grads():
    reseed(18)
    for dt in DT4:
        rtol, atol = TOL[dt]
        for Bn, i, o in [(4, 3, 5), (1, 1, 1), (0, 3, 2), (3, 0, 2), (3, 2, 0), (7, 65, 257), (64, 129, 33)]:
            for lx, lg in [("contig", "contig"), ("t", "slice"), ("offset", "expand")]:
                x, g = place(randn(Bn, i, dtype=dt), lx), place(randn(Bn, o, dtype=dt), lg)
                for wb in [True, False]:
                    def run(x=x, g=g, wb=wb):
                        gw, gb = linalg.per_sample_grad_linear(x, g, with_bias=wb)
                        rw, rb = RL.per_sample_grad_linear(c64(x), c64(g), wb)
                        m = compare(gw, rounded(rw, dt), rtol, atol, srel=0.0, dtype=dt)
                        if m:
                            return "grad_weight: " + m
                        if not wb:
                            return None if gb is None else "grad_bias not None with with_bias=False"
                        m = compare(gb, rb, 0, 0, dtype=dt)
                        if m:
                            return "grad_bias: " + m
                        if gb.numel() and gb.data_ptr() == g.data_ptr():
                            return "grad_bias aliases grad_out"
                        return None
                    check("linalg.per_sample_grad_linear", f"{dt} (B,in,out)={(Bn, i, o)} x:{lx} g:{lg} bias={wb}", run)
    for dt in [torch.float64, torch.float32]:
        def run(dt=dt):
            x, g = place(randn(5, 4, dtype=dt)).requires_grad_(), place(randn(5, 3, dtype=dt)).requires_grad_()
            w1, w2 = place(randn(5, 3, 4, dtype=dt)), place(randn(5, 3, dtype=dt))
            gw, gb = linalg.per_sample_grad_linear(x, g)
            d = torch.autograd.grad((gw * w1).sum() + (gb * w2).sum(), (x, g))
            xr, gr_ = c64(x).requires_grad_(), c64(g).requires_grad_()
            rw, rb = RL.per_sample_grad_linear(xr, gr_)
            dr = torch.autograd.grad((rw * c64(w1)).sum() + (rb * c64(w2)).sum(), (xr, gr_))
            return "; ".join(m for a, b in zip(d, dr) if (m := compare(a, b, *TOL[dt], srel=0.1)))
        check("linalg.per_sample_grad_linear", f"{dt} backward", run)

    class Shared(nn.Module):
        def __init__(s):
            super().__init__(); s.a = nn.Linear(4, 4); s.b = nn.Linear(4, 2, bias=False); s.ln = nn.LayerNorm(4)

        def forward(s, x):
            h = torch.tanh(s.a(x)); h = s.ln(s.a(h)); return s.b(h)

    class Seq3D(nn.Module):
        def __init__(s):
            super().__init__(); s.a = nn.Linear(3, 5); s.b = nn.Linear(5, 2)

        def forward(s, x):
            return s.b(torch.relu(s.a(x))).mean(1)

    class Unused(nn.Module):
        def __init__(s):
            super().__init__(); s.a = nn.Linear(3, 2); s.u = nn.Linear(3, 3)

        def forward(s, x):
            return s.a(x)

    torch.manual_seed(0)
    for dt in [torch.float64, torch.float32]:
        for mk, xs, ts in [(Shared, (6, 4), (6, 2)), (Seq3D, (5, 7, 3), (5, 2)), (Unused, (4, 3), (4, 2)),
                           (lambda: nn.Linear(3, 2), (4, 3), (4, 2)), (lambda: nn.Linear(3, 2, bias=False), (4, 3), (4, 2)),
                           (lambda: nn.Linear(65, 33), (40, 65), (40, 33))]:
            for li, loss_fn in enumerate([Fnn.mse_loss, lambda o, t: (o * t).sum() * 3.0]):
                def run(mk=mk, xs=xs, ts=ts, loss_fn=loss_fn, dt=dt):
                    model = mk().to(DEV, dt)
                    x, t = place(randn(*xs, dtype=dt)), place(randn(*ts, dtype=dt))
                    g = linalg.per_sample_grads(model, loss_fn, x, t)
                    r = RL.per_sample_grads(model, loss_fn, x, t)
                    if set(g) != set(r):
                        return f"keys {sorted(g)} != {sorted(r)}"
                    tol = (1e-4, 1e-6) if dt == torch.float32 else (1e-9, 1e-12)
                    return "; ".join(f"{k}: {m}" for k in r if (m := compare(g[k], r[k], *tol, srel=0.1)))
                name = mk.__name__ if isinstance(mk, type) else "Linear"
                check("linalg.per_sample_grads", f"{dt} {name}{xs} loss#{li}", run)

    def frozen():
        m = nn.Linear(3, 2).to(DEV); m.bias.requires_grad_(False)
        g = linalg.per_sample_grads(m, Fnn.mse_loss, place(randn(4, 3, dtype=torch.float32)), place(randn(4, 2, dtype=torch.float32)))
        return None if set(g) == {"weight"} else f"keys {sorted(g)} (frozen bias should be absent)"
    check("linalg.per_sample_grads", "frozen bias", frozen)


def spd(n, cond=100., batch=(), scale=1.0):
    Q, _ = torch.linalg.qr(randn(*batch, n, n))
    ev = torch.logspace(0, -math.log10(cond), n, dtype=torch.float64) if n > 1 else torch.ones(1, dtype=torch.float64)
    return ((Q * ev.unsqueeze(-2)) @ Q.mT) * scale


def relerr(a, b):
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def mir_check(A, p, eps, fb, tol, **kw):
    def run():
        X = linalg.matrix_inverse_root(A, p, eps, fallback=fb, **kw)
        if X.shape != A.shape or X.dtype != A.dtype or X.device.type != DEV.type:
            return f"shape/dtype/device {tuple(X.shape)} {X.dtype} {X.device}"
        Xr = RL.matrix_inverse_root(c64(A), p, eps)
        if not torch.isfinite(X).all():
            return f"non-finite output ({int((~torch.isfinite(X)).sum())} el.; ref finite={torch.isfinite(Xr).all().item()})"
        e = relerr(X, Xr)
        return None if e <= tol else f"relative Frobenius error {e:.3g} > {tol:g}"
    return run


@section
def linalg_matrix_inverse_root():
    reseed(19)
    for dt in [torch.float32, torch.float64]:
        tol = 1e-3 if dt == torch.float32 else 1e-8
        i = 0
        for n in [1, 2, 3, 16, 17, 64, 65, 129]:
            for p in [1, 2, 3, 4, 8, 32]:
                for fb in ["auto", "never", "always"]:
                    eps = [1e-6, 0.0, 1.0][i % 3]
                    i += 1
                    A = place(spd(n, 1e3).to(dt), ["contig", "t", "offset"][i % 3])
                    check("linalg.matrix_inverse_root", f"{dt} n={n} p={p} fallback={fb} eps={eps}", mir_check(A, p, eps, fb, tol))
        # conditioning within max_cond (never) and beyond (auto falls back)
        # error bound ~ eps * cond / p (the sensitivity of A^(-1/p) at the smallest eigenvalue)
        for cond, fbs in ([(1e2, ["never"]), (1e4, ["never", "auto"]), (1e5, ["auto"])] if dt == torch.float32 else
                          [(1e4, ["never"]), (1e8, ["never", "auto"]), (1e12, ["auto"])]):
            for fb in fbs:
                for p in [1, 2, 4]:
                    A = place(spd(20, cond).to(dt))
                    t = max(tol, 2 * torch.finfo(dt).eps * cond / p)
                    check("linalg.matrix_inverse_root", f"{dt} cond={cond:g} p={p} fallback={fb} eps=0", mir_check(A, p, 0.0, fb, t))
        # scale
        for scale in [1e-30, 1e-20, 1e-10, 1e10, 1e18, 1e30, 1e36]:
            A = spd(6, 1e2, scale=scale).to(dt)
            if not torch.isfinite(A).all():
                continue
            for fb in ["auto", "never"]:
                check("linalg.matrix_inverse_root", f"{dt} scale={scale:g} fallback={fb}", mir_check(place(A), 4, 0.0, fb, tol))
        # batched, mixed batch, non-contiguous batch
        A = spd(8, 1e2, batch=(3, 2)).to(dt)
        for fb in ["auto", "never"]:
            check("linalg.matrix_inverse_root", f"{dt} batched (3,2,8,8) fallback={fb}", mir_check(place(A), 4, 1e-6, fb, tol))
            check("linalg.matrix_inverse_root", f"{dt} batched, batch dims transposed fallback={fb}",
                  mir_check(place(A.transpose(0, 1).contiguous()).transpose(0, 1), 4, 1e-6, fb, tol))
        A2 = A.clone()
        A2[1, 0] = -A2[1, 0]
        A2[0, 1] = torch.diag(torch.tensor([2., 0., -1., 3., 1, 1, 1, 1], dtype=dt))
        A2[2, 1] = 0
        A2[2, 0] = torch.eye(8, dtype=dt)

        def mixed(A2=A2, dt=dt):
            X = linalg.matrix_inverse_root(place(A2), 4, 1e-6, fallback="auto")
            Xr = RL.matrix_inverse_root(A2.double(), 4, 1e-6)
            errs = [relerr(X[i, j], Xr[i, j]) for i in range(3) for j in range(2)]
            return None if max(errs) <= tol else f"per-matrix relerr {[f'{e:.2g}' for e in errs]}"
        check("linalg.matrix_inverse_root", f"{dt} batch with indefinite / singular diagonal / zero / identity (auto)", mixed)
        check("linalg.matrix_inverse_root", f"{dt} many small (1000,4,4) never", mir_check(place(spd(4, 10, batch=(1000,)).to(dt)), 4, 1e-6, "never", tol))
        check("linalg.matrix_inverse_root", f"{dt} identity exact", lambda: compare(
            linalg.matrix_inverse_root(place(torch.eye(5, dtype=dt)), 4, 0.0), torch.eye(5), 1e-12 if dt == torch.float64 else 1e-6, 0))
        U = torch.triu(randn(7, 7), 1)
        Ans = (spd(7, 10) + 0.3 * (U - U.T)).to(dt)  # symmetric part SPD, plus an antisymmetric part
        for fb in ["auto", "never", "always"]:
            check("linalg.matrix_inverse_root", f"{dt} nonsymmetric input uses (A+A^T)/2, fallback={fb}",
                  mir_check(place(Ans), 2, 1e-6, fb, tol))

        def resid(dt=dt):
            X, r = linalg.matrix_inverse_root(place(spd(16, 1e2, batch=(5,)).to(dt)), 4, 1e-6, return_residual=True)
            if r.shape != (5,):
                return f"residual shape {tuple(r.shape)}"
            return None if (r.cpu() < (5e-3 if dt == torch.float32 else 1e-5) * 4).all() else f"large residuals {r.tolist()}"
        check("linalg.matrix_inverse_root", f"{dt} return_residual", resid)
        An = spd(5, 10).to(dt)
        An[1, 2] = NAN
        expect_raise("linalg.matrix_inverse_root", f"{dt} NaN input, auto raises", lambda: linalg.matrix_inverse_root(place(An), 4, fallback="auto"), (ValueError,))
        check("linalg.matrix_inverse_root", f"{dt} NaN input, never gives NaN", lambda: None if torch.isnan(
            linalg.matrix_inverse_root(place(An), 4, fallback="never")).any() else "no NaN for NaN input")
        check("linalg.matrix_inverse_root", f"{dt} zero-size batch", lambda: compare(
            linalg.matrix_inverse_root(place(torch.zeros(0, 4, 4, dtype=dt)), 4), torch.zeros(0, 4, 4), 0, 0))

        def grad(dt=dt):
            A = place(spd(5, 10).to(dt)).requires_grad_()
            W = place(randn(5, 5, dtype=dt))
            (g,) = torch.autograd.grad((linalg.matrix_inverse_root(A, 4, 1e-6) * W).sum(), A)
            Ar = c64(A).requires_grad_()
            (gr,) = torch.autograd.grad((RL.matrix_inverse_root(Ar, 4, 1e-6) * c64(W)).sum(), Ar)
            e = relerr(g, gr)
            return None if e <= (1e-3 if dt == torch.float32 else 1e-7) else f"gradient relerr {e:.3g}"
        check("linalg.matrix_inverse_root", f"{dt} backward", grad)


@section
def linalg_shampoo():
    for dt in [torch.float32, torch.float64]:
        def run(dt=dt):
            outs = []
            for method in ["newton", "eigh"]:
                torch.manual_seed(0)
                model = nn.Sequential(nn.Linear(10, 20), nn.Tanh(), nn.Linear(20, 3)).to(DEV, dt)
                opt = linalg.Shampoo(model.parameters(), lr=1e-2, root_method=method, block_size=16)
                reseed(20)
                for _ in range(4):
                    x, y = place(randn(32, 10, dtype=dt)), place(randn(32, 3, dtype=dt))
                    opt.zero_grad()
                    Fnn.mse_loss(model(x), y).backward()
                    opt.step()
                outs.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
            if not torch.isfinite(outs[0]).all():
                return "non-finite parameters"
            return compare(outs[0], outs[1].cpu(), 2e-3 if dt == torch.float32 else 1e-6, 1e-6, srel=1.0)
        check("linalg.Shampoo", f"{dt} newton vs eigh, 4 steps", run)
    check("linalg.memory_info", "smoke", lambda: None if isinstance(linalg.memory_info(DEV if IS_CUDA else "cpu"), dict) else "not a dict")


# ----------------------------------------------------------------------------------------- large inputs

@section
def large_inputs():
    """Many blocks / grid-stride loops / vector-loop tails on big tensors (all well under 2 GB)."""
    reseed(22)
    for dt in [torch.float32, torch.float16]:
        n = (1 << 22) + 5
        x, y = place(randn(n, dtype=dt), "offset"), place(randn(n, dtype=dt))
        check("fused.relu_add", f"{dt} n={n} misaligned", lambda: compare(
            fused.relu_add(x, y, 0.25), cands(lambda a, b: RF.relu_add(a, b, 0.25), [x, y], dt), *TOL[dt], srel=0.0))
        check("ebm.langevin_step", f"{dt} n={n} misaligned", lambda: compare(
            ebm.langevin_step(x, y, 0.01, 0.0, clamp=(-1.0, 2.0)), cands(lambda a, b: ref_ls(a, b, 0.01, (-1.0, 2.0)), [x, y], dt),
            *TOL[dt], srel=0.1))
    for dt in [torch.float32, torch.float64, torch.bfloat16]:
        rtol, atol = ebm_tol(dt, "")
        for D in [2, 16, 33, 64, 65]:
            x = place(randn(4099, D, dtype=dt))
            for model in MODEL_PARAMS:
                for kind in ["energy", "score"]:
                    op, rf = getattr(ebm, f"{model}_{kind}"), getattr(RE, f"{model}_{kind}")
                    check(f"ebm.{model}_{kind}", f"{dt} B=4099 D={D}",
                          lambda: compare(op(x), cands(rf, [x], dt), rtol, atol, dtype=dt))
            mu, P = gauss_params(D, dt)
            mu, P = place(mu.to(dt)), place(P.to(dt))
            for kind in ["energy", "score"]:
                op, rf = getattr(ebm, f"gaussian_{kind}"), getattr(RE, f"gaussian_{kind}")
                check(f"ebm.gaussian_{kind}", f"{dt} B=4099 D={D}",
                      lambda: compare(op(x, mu, P), cands(rf, [x, mu, P], dt), *TOL[dt], dtype=dt))
    for dt in [torch.float32, torch.float64]:
        rtol, atol = (1e-4, 1e-6) if dt == torch.float32 else (1e-9, 1e-12)
        for D in [2, 16, 33]:
            for model in ["double_well", "rastrigin", "gaussian"]:
                p = chain_params(model, D, dt)
                x = place(randn(4099, D, scale=0.6, dtype=dt))
                check("ebm.langevin_chain", f"{model} {dt} B=4099 D={D} noise_scale=0", lambda: compare(
                    ebm.langevin_chain(x, model, 5, 0.005, 0.0, **p),
                    rounded(RE.langevin_chain(c64(x), ref_score_fn(model, p), 5, 0.005, 0.0), dt), rtol, atol, srel=0.1))
    S = diffusion.ddpm_schedule(1000, "squaredcos_cap_v2", device=DEV)
    for dt in [torch.float32, torch.bfloat16]:
        m, x, z = (place(randn(4099, 257, dtype=dt)) for _ in range(3))
        t = place(torch.randint(1, 1000, (4099,), generator=RNG))
        check("diffusion.ddpm_step", f"{dt} (4099, 257) per-row t", lambda: compare(
            diffusion.ddpm_step(m, t, x, S, noise=z, prediction_type="v_prediction"),
            ref_cands_step("ddpm", [m, t, x, S, z], dict(prediction_type="v_prediction"), dt), *step_tol(dt), srel=0.1))
        tp = place(torch.clamp(t.cpu() - 20, min=-1))
        check("diffusion.ddim_step", f"{dt} (4099, 257) per-row t", lambda: compare(
            diffusion.ddim_step(m, t, tp, x, S, eta=0.3, noise=z, use_clipped_model_output=True),
            ref_cands_step("ddim", [m, t, tp, x, S, z], dict(eta=0.3, use_clipped_model_output=True), dt), *step_tol(dt), srel=0.1))
    for dt in [torch.float32, torch.float16]:
        A, B = place(randn(64, 32, 32, dtype=dt)), place(randn(64, 8, 8, dtype=dt), "t")
        check("linalg.kron", f"{dt} (64,32,32) x (64,8,8)", lambda: compare(
            linalg.kron(A, B), cands(RL.kron, [A, B], dt), *TOL[dt], srel=0.0))
        x, g = place(randn(256, 160, dtype=dt)), place(randn(256, 96, dtype=dt))
        check("linalg.per_sample_grad_linear", f"{dt} (256, 160, 96)", lambda: compare(
            linalg.per_sample_grad_linear(x, g)[0], rounded(RL.per_sample_grad_linear(c64(x), c64(g))[0], dt), *TOL[dt], srel=0.0))
    for dt in [torch.float32, torch.float64]:
        check("linalg.matrix_inverse_root", f"{dt} (4, 512, 512) never",
              mir_check(place(spd(512, 1e2, batch=(4,)).to(dt)), 4, 1e-6, "never", 1e-3 if dt == torch.float32 else 1e-8))


# ----------------------------------------------------------------------------------------- random streams

def _find_run(a, probe):
    """True if probe (1-D) occurs as a contiguous run inside a (1-D)."""
    k = probe.numel()
    for i in (a == probe[0]).nonzero().flatten().tolist():
        if i + k <= a.numel() and torch.equal(a[i:i + k], probe):
            return True
    return False


def _overlap(name_a, a, name_b, b, k=8):
    a, b = a.detach().reshape(-1).cpu().double(), b.detach().reshape(-1).cpu().double()
    if a.numel() < k or b.numel() < k:
        return None
    for pa, pb, na, nb in ((a, b, name_a, name_b), (b, a, name_b, name_a)):
        for start in (0, pb.numel() // 2, pb.numel() - k):
            if _find_run(pa, pb[start:start + k]):
                return f"{nb} repeats a run of {na}'s random numbers (stream overlap)"
    return None


@section
def random_streams():
    """Consecutive random ops must not reuse (even shifted) the generator's numbers, and the outputs of
    random ops never require grad."""
    S = diffusion.ddpm_schedule(50, device=DEV)
    eta = 0.5  # sqrt(2 eta) = 1: langevin_step(0, 0) is the raw normal
    draws = {
        "normal": lambda: sampling.normal(place(torch.zeros(7)), place(torch.ones(7)), 1001).float(),
        "normal(float16)": lambda: sampling.normal(place(torch.zeros(7)), place(torch.ones(7)), 1001, dtype=torch.float16).float(),
        "langevin_step": lambda: ebm.langevin_step(place(torch.zeros(7007)), place(torch.zeros(7007)), eta, 1.0),
        "ddpm_step": lambda: diffusion.ddpm_step(place(torch.zeros(7, 1001)), 25, place(torch.zeros(7, 1001)), S),
        "ddim_step": lambda: diffusion.ddim_step(place(torch.zeros(7, 1001)), 25, 10, place(torch.zeros(7, 1001)), S, eta=1.0),
        "langevin_chain": lambda: ebm.langevin_chain(place(torch.zeros(1001, 7)), "harmonic", 1, eta, k=0.0),
        "langevin_chain(D=65)": lambda: ebm.langevin_chain(place(torch.zeros(101, 65)), "harmonic", 1, eta, k=0.0),
    }
    names = list(draws)
    for i, na in enumerate(names):
        for nb in names[i:]:
            def run(na=na, nb=nb):
                torch.manual_seed(11)
                a = draws[na]()
                b = draws[nb]()  # no reseed: the generator must have moved on
                if torch.equal(a.reshape(-1)[:64], b.reshape(-1)[:64]) and na == nb:
                    return "second call returned the first call's numbers"
                return _overlap(na, a, nb, b)
            check("random streams", f"{na} then {nb}", run)
    for na in names:
        def run(na=na):
            g1, g2 = gen(5), gen(5)
            torch.manual_seed(0)
            fn = draws[na]
            # the same op through an explicit generator, twice: the generator advances
            if na.startswith("normal"):
                a = sampling.normal(place(torch.zeros(7)), place(torch.ones(7)), 1001, generator=g1)
                b = sampling.normal(place(torch.zeros(7)), place(torch.ones(7)), 1001, generator=g1)
            elif na == "langevin_step":
                a = ebm.langevin_step(place(torch.zeros(7007)), place(torch.zeros(7007)), eta, 1.0, generator=g1)
                b = ebm.langevin_step(place(torch.zeros(7007)), place(torch.zeros(7007)), eta, 1.0, generator=g1)
            elif na.startswith("langevin_chain"):
                a = ebm.langevin_chain(place(torch.zeros(1001, 7)), "harmonic", 1, eta, k=0.0, generator=g1)
                b = ebm.langevin_chain(place(torch.zeros(1001, 7)), "harmonic", 1, eta, k=0.0, generator=g1)
            else:
                return None
            del fn, g2
            return _overlap("first call", a, "second call", b)
        check("random streams", f"{na}: one generator, two calls", run)

    def nograd():
        m = []
        mu, sd = place(torch.zeros(3)).requires_grad_(), place(torch.ones(3)).requires_grad_()
        if sampling.normal(mu, sd, 5).requires_grad: m.append("normal output requires grad")
        x = place(torch.zeros(4, 3)).requires_grad_()
        if ebm.langevin_chain(x, "harmonic", 2, 0.1).requires_grad: m.append("langevin_chain output requires grad")
        if any(t.requires_grad for t in ebm.hmc_chain(x, "harmonic", 2, 0.1, 2)): m.append("hmc_chain output requires grad")
        s_ = place(torch.randn(6, 3)).requires_grad_()
        if any(t.requires_grad for t in sampling.cem_update(s_, place(torch.randn(6)), 2, mu, sd)): m.append("cem_update output requires grad")
        return "; ".join(m)
    check("samplers", "outputs never require grad", nograd)


# ----------------------------------------------------------------------------------------- side stream

@section
def side_stream():
    """Ops must run on the current stream: inputs are written on a side stream right before the op
    (after a slow kernel on that stream), the result is read after a full synchronize."""
    import contextlib
    reseed(23)
    side = torch.cuda.Stream(DEV) if IS_CUDA else None
    big = place(randn(2048 if IS_CUDA else 64, 2048 if IS_CUDA else 64, dtype=torch.float32))
    S = diffusion.ddpm_schedule(50, device=DEV)

    def on_side(srcs, fn):
        """Copy srcs into fresh buffers on the side stream after slow work there, then run fn on them."""
        ctx = torch.cuda.stream(side) if IS_CUDA else contextlib.nullcontext()
        with ctx:
            if IS_CUDA:
                side.wait_stream(torch.cuda.current_stream(DEV))
            for _ in range(4):
                torch.mm(big, big)
            bufs = [torch.empty_like(t) for t in srcs]
            for b, t in zip(bufs, srcs):
                b.copy_(t)
            out = fn(*bufs)
        if IS_CUDA:
            torch.cuda.synchronize(DEV)
        return out

    x, y = place(randn(1 << 20, dtype=torch.float32)), place(randn(1 << 20, dtype=torch.float32))
    xs, ms = place(randn(512, 33, dtype=torch.float32)), place(randn(33, dtype=torch.float32))
    P = place(gauss_params(33, torch.float32)[1].float())
    m3, x3, z3 = (place(randn(64, 4, 33, dtype=torch.float32)) for _ in range(3))
    cx = place(randn(8, 16, 64, dtype=torch.float32))
    cw = place(randn(32, 16, 5, scale=0.1, dtype=torch.float32))
    cg = place(randn(32, dtype=torch.float32))
    A = place(spd(16, 10, batch=(8,)).float())
    cases = [
        ("fused.relu_add", [x, y], lambda a, b: fused.relu_add(a, b, 0.5), lambda a, b: RF.relu_add(a, b, 0.5)),
        ("ebm.langevin_step", [x, y], lambda a, b: ebm.langevin_step(a, b, 0.1, 0.0), lambda a, b: ref_ls(a, b, 0.1, None)),
        ("ebm.rastrigin_score", [xs], ebm.rastrigin_score, RE.rastrigin_score),
        ("ebm.gaussian_energy", [xs, ms, P], ebm.gaussian_energy, RE.gaussian_energy),
        ("ebm.langevin_chain", [xs], lambda a: ebm.langevin_chain(a, "double_well", 3, 0.005, 0.0),
         lambda a: RE.langevin_chain(a, lambda v: RE.double_well_score(v), 3, 0.005, 0.0)),
        ("diffusion.ddpm_step", [m3, x3, z3], lambda a, b, c: diffusion.ddpm_step(a, 30, b, S, noise=c),
         lambda a, b, c: RD.ddpm_step(a, 30, b, S.cpu(), noise=c)),
        ("diffusion.ddim_step", [m3, x3, z3], lambda a, b, c: diffusion.ddim_step(a, 30, 9, b, S, eta=0.5, noise=c),
         lambda a, b, c: RD.ddim_step(a, 30, 9, b, S.cpu(), eta=0.5, noise=c)),
        ("diffusion.conv1d_gn_mish", [cx, cw, cg], lambda a, b, c: diffusion.conv1d_gn_mish(a, b, c, c, c, 4),
         lambda a, b, c: RD.conv1d_gn_mish(a, b, c, c, c, 4)),
        ("linalg.kron", [xs[:64, :8], ms[:16].view(4, 4)], linalg.kron, RL.kron),
        ("linalg.per_sample_grad_linear", [xs, xs[:, :9]],
         lambda a, b: linalg.per_sample_grad_linear(a, b)[0], lambda a, b: RL.per_sample_grad_linear(a, b)[0]),
        ("linalg.matrix_inverse_root", [A], lambda a: linalg.matrix_inverse_root(a, 4, fallback="never"),
         lambda a: RL.matrix_inverse_root(a, 4)),
        ("sampling.cem_update", [xs, ms], lambda a, b: sampling.cem_update(a, a[:, 0], 9, b, b.abs())[0],
         lambda a, b: RS.cem_update(a, a[:, 0], 9, b, b.abs())[0]),
    ]
    for name, srcs, fo, fr in cases:
        def run(srcs=srcs, fo=fo, fr=fr, name=name):
            out = on_side(srcs, fo)
            tol = (1e-3, 1e-5) if "matrix_inverse_root" in name else (1e-4, 1e-6)
            return compare(out, fr(*[c64(t) for t in srcs]), *tol, srel=0.1)
        check(name, "inputs written on a side stream", run)

    def normal_side():
        out = on_side([place(torch.zeros(7)), place(torch.ones(7))], lambda a, b: sampling.normal(a, b, 20000))
        z = out.double().cpu()
        if not torch.isfinite(z).all():
            return "non-finite samples"
        return ztest("mean", z.mean(), 0, 1 / z.numel() ** 0.5) or ztest("std", z.std(), 1, (0.5 / z.numel()) ** 0.5)
    check("sampling.normal", "mean/std written on a side stream", normal_side)


# ----------------------------------------------------------------------------------------- autocast / errors

@section
def autocast_and_errors():
    reseed(21)
    LOW = torch.bfloat16
    dtyp = DEV.type
    sched = diffusion.ddpm_schedule(50, device=DEV)
    t = place(torch.tensor([3, 40]))
    x32, x16 = place(randn(6, 4, dtype=torch.float32)), place(randn(6, 4, dtype=LOW))
    m16, s32, z32 = place(randn(2, 3, 4, dtype=LOW)), place(randn(2, 3, 4, dtype=torch.float32)), place(randn(2, 3, 4, dtype=torch.float32))
    conv = (place(randn(2, 8, 16, dtype=LOW)), place(randn(8, 8, 5, scale=0.1, dtype=torch.float32)), place(randn(8, dtype=torch.float32)),
            place(torch.ones(8)), place(torch.zeros(8)))
    cases = [
        ("fused.relu_add", lambda x, y: fused.relu_add(x, y, 0.5), (x16, x32)),
        ("ebm.gaussian_energy", ebm.gaussian_energy, (x16, place(torch.zeros(4)), place(torch.eye(4)))),
        ("ebm.gaussian_score", ebm.gaussian_score, (x16, place(torch.zeros(4)), place(torch.eye(4)))),
        ("ebm.langevin_step", lambda x, g: ebm.langevin_step(x, g, 0.1, 0.0), (x32, x16)),
        ("diffusion.ddpm_step", lambda m, x, z: diffusion.ddpm_step(m, t, x, sched, z), (m16, s32, z32)),
        ("diffusion.ddim_step", lambda m, x: diffusion.ddim_step(m, t, t - 1, x, sched), (m16, s32)),
        ("diffusion.conv1d_gn_mish", lambda *a: diffusion.conv1d_gn_mish(*a, 2), conv),
        ("sampling.normal", lambda mean, std: sampling.normal(mean, std, 5, generator=gen(1)),
         (place(torch.zeros(4, dtype=LOW)), place(torch.ones(4)))),
        ("linalg.kron", linalg.kron, (place(randn(2, 3, dtype=LOW)), place(randn(2, 2, dtype=torch.float32)))),
    ]
    for name, call, inputs in cases:
        expect_raise(name, "mixed dtypes outside autocast", lambda: call(*inputs), (ValueError,))
        if name in ("linalg.kron",):
            continue

        def run(call=call, inputs=inputs):
            with torch.autocast(dtyp, dtype=LOW):
                got = call(*inputs)
            exp = call(*(i.float() for i in inputs))
            if got.dtype != torch.float32:
                return f"dtype under autocast {got.dtype}, expected float32"
            return compare(got, exp.cpu(), 1e-5, 1e-6)
        check(name, "mixed dtypes under autocast compute in the widest", run)
    # in-place ops keep their checks
    expect_raise("ebm.langevin_step_", "mixed dtypes under autocast", lambda: _ac_inplace(dtyp, x32, LOW), (ValueError,))
    # requires_grad in-place refused
    expect_raise("ebm.langevin_step_", "x requires grad", lambda: ebm.langevin_step_(place(randn(3, 4, dtype=torch.float32)).requires_grad_(),
                                                                                    place(randn(3, 4, dtype=torch.float32)), 0.1))
    # shape / argument errors
    expect_raise("fused.relu_add", "shape mismatch", lambda: fused.relu_add(place(torch.zeros(3)), place(torch.zeros(4))))
    expect_raise("ebm.rosenbrock_energy", "D=1", lambda: ebm.rosenbrock_energy(place(torch.zeros(3, 1))))
    expect_raise("ebm.langevin_chain", "float16 x", lambda: ebm.langevin_chain(place(torch.zeros(3, 2, dtype=torch.float16)), "harmonic", 2, 0.1))
    expect_raise("ebm.langevin_chain", "unknown model", lambda: ebm.langevin_chain(place(torch.zeros(3, 2)), "nope", 2, 0.1))
    expect_raise("ebm.langevin_step", "clamp < 0", lambda: ebm.langevin_step(place(torch.zeros(3)), place(torch.zeros(3)), 0.1, clamp=-1.0))
    expect_raise("sampling.cem_update", "n_elite > n", lambda: sampling.cem_update(place(torch.zeros(4, 2)), place(torch.zeros(4)), 5,
                                                                                   place(torch.zeros(2)), place(torch.ones(2))))
    expect_raise("sampling.cem_update", "n_elite = 0", lambda: sampling.cem_update(place(torch.zeros(4, 2)), place(torch.zeros(4)), 0,
                                                                                   place(torch.zeros(2)), place(torch.ones(2))))
    expect_raise("diffusion.conv1d_gn_mish", "groups do not divide C_out", lambda: diffusion.conv1d_gn_mish(
        place(torch.zeros(1, 2, 8)), place(torch.zeros(6, 2, 3)), None, place(torch.ones(6)), place(torch.zeros(6)), 4))
    expect_raise("diffusion.ddpm_step", "unknown prediction_type", lambda: diffusion.ddpm_step(
        place(torch.zeros(2, 3)), 3, place(torch.zeros(2, 3)), sched, prediction_type="x0"))
    expect_raise("linalg.matrix_inverse_root", "p = 0", lambda: linalg.matrix_inverse_root(place(torch.eye(3)), 0))
    expect_raise("linalg.matrix_inverse_root", "p = 33", lambda: linalg.matrix_inverse_root(place(torch.eye(3)), 33))
    expect_raise("linalg.matrix_inverse_root", "float16", lambda: linalg.matrix_inverse_root(place(torch.eye(3, dtype=torch.float16)), 4))
    expect_raise("linalg.kron", "batch dims differ", lambda: linalg.kron(place(torch.zeros(2, 2, 2)), place(torch.zeros(3, 2, 2))))
    # device mismatch (last: on CUDA a wrong-device pointer must be refused, not read)
    if IS_CUDA:
        cpu = torch.zeros(3, 4)
        d = place(torch.zeros(3, 4))
        expect_raise("fused.relu_add", "inputs on cuda and cpu", lambda: fused.relu_add(d, cpu))
        expect_raise("ebm.langevin_step", "grad on cpu", lambda: ebm.langevin_step(d, cpu, 0.1))
        expect_raise("ebm.gaussian_energy", "precision on cpu", lambda: ebm.gaussian_energy(d, place(torch.zeros(4)), torch.eye(4)))
        expect_raise("ebm.langevin_chain", "mean on cpu", lambda: ebm.langevin_chain(d, "gaussian", 2, 0.1, mean=torch.zeros(4),
                                                                                     precision=place(torch.eye(4))))
        expect_raise("diffusion.ddpm_step", "schedule on cpu", lambda: diffusion.ddpm_step(d, 3, d, sched.cpu(), noise=d))
        expect_raise("diffusion.ddpm_step", "noise on cpu", lambda: diffusion.ddpm_step(d, 3, d, sched, noise=cpu))
        expect_raise("diffusion.conv1d_gn_mish", "weight on cpu", lambda: diffusion.conv1d_gn_mish(
            place(torch.zeros(1, 2, 8)), torch.zeros(4, 2, 3), None, place(torch.ones(4)), place(torch.zeros(4)), 2))
        expect_raise("sampling.normal", "std on cpu", lambda: sampling.normal(place(torch.zeros(3)), torch.ones(3), 5))
        expect_raise("sampling.cem_update", "scores on cpu", lambda: sampling.cem_update(place(torch.zeros(4, 2)), torch.zeros(4), 2,
                                                                                         place(torch.zeros(2)), place(torch.ones(2))))
        expect_raise("linalg.kron", "B on cpu", lambda: linalg.kron(place(torch.zeros(2, 2)), torch.zeros(2, 2)))
        expect_raise("linalg.per_sample_grad_linear", "grad_out on cpu", lambda: linalg.per_sample_grad_linear(d, cpu))
        check("device", "still healthy after the error checks",
              lambda: None if torch.equal(fused.relu_add(d, d, 1.0).cpu(), torch.ones(3, 4)) else "wrong result")


def _ac_inplace(dtyp, x32, LOW):
    with torch.autocast(dtyp, dtype=LOW):
        ebm.langevin_step_(x32.clone(), x32.to(LOW), 0.1)


# ========================================================================================= main (child)

def child():
    names = [s.__name__ for s in SECTIONS]
    if ARGS.list:
        print("\n".join(names))
        print("@@DONE", flush=True)
        return
    only = set(ARGS.only.split(",")) if ARGS.only else None
    print("@@SECTIONS " + " ".join(names), flush=True)
    if ARGS.verbose:
        print(f"device {DEV} ({torch.cuda.get_device_name(DEV) if IS_CUDA else 'cpu'}), torch {torch.__version__}", flush=True)
    for i, sec in enumerate(SECTIONS):
        if i < ARGS.start or (only and sec.__name__ not in only):
            continue
        print(f"@@SECTION {i} {sec.__name__}", flush=True)
        t0, n0, k0 = time.time(), Counter.n, Counter.k
        try:
            sec()
        except FatalDeviceError:
            print_suppressed()
            print(f"@@COUNTS {Counter.n} {Counter.k} {Counter.known}", flush=True)
            sys.exit(3)
        except Exception as e:  # a bug in the section itself: report, go on
            Counter.n += 1
            report(f"section {sec.__name__}", "harness", short(e))
            if ARGS.verbose:
                traceback.print_exc()
        if IS_CUDA:
            torch.cuda.synchronize()
        if ARGS.verbose:
            print(f"  [{sec.__name__}: {Counter.n - n0} checks, {Counter.k - k0} failures, {time.time() - t0:.1f} s]", flush=True)
        print(f"@@COUNTS {Counter.n} {Counter.k} {Counter.known}", flush=True)
    print_suppressed()
    print("@@DONE", flush=True)


child()
