"""torch.vmap of an ebm energy and score: this tree's vmap rules (one batched call) against the same op
under torch's fallback (one call per member; the tree given as BASE, before the rules), and the
torch.func derivatives a researcher writes, timed on the device at hand.

    python vmap_bench.py BASE_KERNELS_ROOT
"""
import sys
import warnings

import torch
from triton.testing import do_bench

import loader

warnings.simplefilter("ignore")
device = "cuda"
new, base = loader.load("ebm"), loader.load("ebm", root=sys.argv[1])
print(torch.cuda.get_device_name(), "torch", torch.__version__, "cuda", torch.version.cuda)
for members, rows in ((8, 65536), (64, 4096), (1024, 16)):
    x = torch.randn(members, rows, 16, device=device)
    for op in ("rastrigin_energy", "rastrigin_score"):
        t_new = do_bench(lambda: torch.vmap(getattr(new, op))(x))
        t_base = do_bench(lambda: torch.vmap(getattr(base, op))(x))
        t_flat = do_bench(lambda: getattr(new, op)(x.view(-1, 16)))
        print(f"vmap {op} members={members} rows={rows} D=16: rule {t_new * 1e3:.1f} us, fallback (base) "
              f"{t_base * 1e3:.1f} us ({t_base / t_new:.1f}x), one flat call {t_flat * 1e3:.1f} us")
x = torch.randn(4096, 16, device=device)
ref = new.reference
grad_ours = lambda: torch.vmap(torch.func.grad(lambda xi: new.ackley_energy(xi[None])[0]))(x)  # noqa: E731
grad_ref = lambda: torch.vmap(torch.func.grad(lambda xi: ref.ackley_energy(xi[None])[0]))(x)  # noqa: E731
torch.testing.assert_close(grad_ours(), grad_ref(), rtol=1e-4, atol=1e-4)
print(f"vmap(grad(ackley_energy)) B=4096 D=16: ours {do_bench(grad_ours) * 1e3:.1f} us, reference "
      f"{do_bench(grad_ref) * 1e3:.1f} us, ackley_score {do_bench(lambda: new.ackley_score(x)) * 1e3:.1f} us")
xs = torch.randn(256, 16, device=device)
hess_ours = lambda: torch.vmap(torch.func.hessian(lambda xi: new.ackley_energy(xi[None])[0]))(xs)  # noqa: E731
hess_ref = lambda: torch.vmap(torch.func.hessian(lambda xi: ref.ackley_energy(xi[None])[0]))(xs)  # noqa: E731
torch.testing.assert_close(hess_ours(), hess_ref(), rtol=1e-4, atol=1e-4)
print(f"vmap(hessian(ackley_energy)) B=256 D=16: ours {do_bench(hess_ours) * 1e3:.1f} us, reference "
      f"{do_bench(hess_ref) * 1e3:.1f} us")
