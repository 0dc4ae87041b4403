"""langevin_step (ebm's langevin_update kernel) and the stepwise chain, base tree against this one:
same draws (bit-identical outputs for one seed), then times under do_bench and with a clean L2, alternating."""
import sys
import torch
import loader
from benchmarks.run import time_us, time_us_clean_l2

loader.prebuild(["ebm"])
loader.prebuild(["ebm"], root=sys.argv[1])
new, old = loader.load("ebm"), loader.load("ebm", root=sys.argv[1])
B, D = 1 << 21, 16
for dtype in (torch.float32, torch.bfloat16, torch.float64):
    x = torch.randn(B, D, device="cuda", dtype=dtype)
    g = torch.randn(B, D, device="cuda", dtype=dtype)
    for clamp in (None, 3.0):
        outs = []
        for fam in (new, old):
            torch.manual_seed(1)
            kw = dict(clamp=(-clamp, clamp)) if clamp else {}
            outs.append(fam.langevin_step(x, g, 0.01, **kw))
        print(f"{dtype} clamp={clamp}: identical {torch.equal(outs[0], outs[1])}", flush=True)
    odd = torch.randn(1001, 7, device="cuda", dtype=dtype)[:, 1:]  # not contiguous, 6 wide: scalar tail
    outs = []
    for fam in (new, old):
        torch.manual_seed(2)
        outs.append(fam.langevin_step(odd, odd, 0.01))
    print(f"{dtype} odd shape: identical {torch.equal(outs[0], outs[1])}", flush=True)
    if dtype == torch.float64:
        continue
    copy = torch.empty_like(x)
    for rnd in range(3):
        line = [f"copy {time_us(lambda: copy.copy_(x), 'cuda'):.1f}"]
        for name, fam in (("new", new), ("old", old)):
            fn = lambda: fam.langevin_step(x, g, 0.01)  # noqa: E731
            line.append(f"{name} {time_us(fn, 'cuda'):.1f}/{time_us_clean_l2(fn):.1f}")
        print(f"{dtype} langevin_step B=2^21 D=16 round {rnd} (do_bench/clean us): " + "; ".join(line), flush=True)
x = torch.randn(65536, 256, device="cuda")
mean, prec = torch.zeros(256, device="cuda"), torch.eye(256, device="cuda")
for rnd in range(2):
    line = []
    for name, fam in (("new", new), ("old", old)):
        fn = lambda: fam.langevin_chain(x, "gaussian", 10, 0.01, mean=mean, precision=prec)  # noqa: E731
        line.append(f"{name} {time_us(fn, 'cuda'):.1f}")
    print(f"langevin_chain gaussian B=65536 D=256 10 steps round {rnd} (us): " + "; ".join(line), flush=True)
