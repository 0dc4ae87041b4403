"""Our ops under torch.autocast (jk.h: call_promoted): autocast hands them mixed float dtypes
(a bfloat16 activation beside float32 weights or a float32 sample), which their dtype checks refuse
outside autocast. Under autocast each op that does not write in place casts its floating tensors to the
widest of their dtypes, as torch's type promotion would for the same expression in plain ops."""
import pytest
import torch
from conftest import registered_ops

import loader

ebm, diffusion, sampling, fused = loader.load("ebm"), loader.load("diffusion"), loader.load("sampling"), loader.load("fused")
LOW = torch.bfloat16


def test_every_op_but_the_in_place_ones_has_autocast_kernels():
    for family in loader.families():
        ops = registered_ops(family)
        for op in ops - {name + "_autograd" for name in ops}:  # jk.h's twins are called with autocast off
            writes = any(a.alias_info is not None and a.alias_info.is_write for a in torch._C._get_schema(op, "").arguments)
            for key in ("AutocastCPU", "AutocastCUDA"):
                assert torch._C._dispatch_has_kernel_for_dispatch_key(op, key) != writes, (op, key)


def mixed_cases(device):
    """(name, call, inputs): call(*inputs) under autocast, with some inputs in bfloat16 and some in float32."""
    f32 = dict(device=device)
    x32, x16 = torch.randn(6, 4, **f32), torch.randn(6, 4, **f32).to(LOW)
    sched = diffusion.ddpm_schedule(50, device=device)
    t = torch.tensor([3, 40], device=device)
    m16, s32, z32 = torch.randn(2, 3, 4, **f32).to(LOW), torch.randn(2, 3, 4, **f32), torch.randn(2, 3, 4, **f32)
    conv = (torch.randn(2, 8, 16, **f32).to(LOW), torch.randn(8, 8, 5, **f32), torch.randn(8, **f32),
            torch.ones(8, **f32), torch.zeros(8, **f32))
    return [
        ("relu_add", lambda x, y: fused.relu_add(x, y, 0.5), (x16, x32)),
        ("gaussian_energy", ebm.gaussian_energy, (x16, torch.zeros(4, **f32), torch.eye(4, **f32))),
        ("langevin_step", lambda x, g: ebm.langevin_step(x, g, 0.1, 0.0), (x32, x16)),
        ("ddpm_step", lambda m, x, z: diffusion.ddpm_step(m, t, x, sched, z), (m16, s32, z32)),
        ("ddim_step", lambda m, x: diffusion.ddim_step(m, t, t - 1, x, sched), (m16, s32)),
        ("conv1d_gn_mish", lambda *a: diffusion.conv1d_gn_mish(*a, 2), conv),
        ("normal", lambda mean, std: sampling.normal(mean, std, 5, generator=torch.Generator(device).manual_seed(1)),
         (torch.zeros(4, **f32).to(LOW), torch.ones(4, **f32))),
    ]


@pytest.mark.parametrize("index", range(7))
def test_mixed_dtypes_under_autocast_compute_in_the_widest(device, index):
    name, call, inputs = mixed_cases(device)[index]
    with pytest.raises(ValueError, match="dtype"):  # outside autocast: the usual error
        call(*inputs)
    with torch.autocast(device, dtype=LOW):
        got = call(*inputs)
    expected = call(*(i.float() for i in inputs))  # the same call with every float32
    assert got.dtype == torch.float32, name
    torch.testing.assert_close(got, expected, msg=name)


def test_one_dtype_is_left_alone_under_autocast(device):
    x, y = torch.randn(5, device=device, dtype=LOW), torch.randn(5, device=device, dtype=LOW)
    with torch.autocast(device, dtype=LOW):
        got = fused.relu_add(x, y)
    assert got.dtype == LOW
    torch.testing.assert_close(got, fused.relu_add(x, y), rtol=0, atol=0)
    x32 = torch.randn(5, 3, device=device)
    with torch.autocast(device, dtype=LOW):  # float32 is not lowered (torch's convolution would be)
        assert ebm.harmonic_score(x32).dtype == torch.float32


def test_in_place_ops_keep_their_checks_under_autocast(device):
    x, g = torch.randn(4, 3, device=device), torch.randn(4, 3, device=device, dtype=LOW)
    with torch.autocast(device, dtype=LOW), pytest.raises(ValueError, match="dtype"):
        ebm.langevin_step_(x, g, 0.1)


def test_autocast_under_torch_compile(device):
    sched = diffusion.ddpm_schedule(50, device=device)
    m, x, z = torch.randn(2, 3, device=device, dtype=LOW), torch.randn(2, 3, device=device), torch.randn(2, 3, device=device)

    def step(m, x, z):
        with torch.autocast(device, dtype=LOW):
            return diffusion.ddpm_step(m, 7, x, sched, z)

    torch.testing.assert_close(torch.compile(step, fullgraph=True)(m, x, z), diffusion.ddpm_step(m.float(), 7, x, sched, z))


def test_matrix_inverse_root_is_not_lowered_under_autocast(device):
    """A float32 A keeps float32 under autocast, as every op of ours given one dtype, on every route. The eigh
    routes (fallback="always"; on the CPU "auto" for float32 matrices of n >= 128; "auto"'s recomputation of the
    matrices that did not converge) are PyTorch ops in ops.py, whose matrix products autocast ran in
    bfloat16: a bfloat16 root, ~2e-3 off, where the Newton route gave float32 (so the dtype depended on n)."""
    linalg = loader.load("linalg")
    q = torch.randn(128, 128, device=device)
    A = q @ q.T / 128 + torch.eye(128, device=device)
    Q = torch.linalg.qr(torch.randn(6, 6, device=device))[0]
    slow = Q @ torch.diag(torch.logspace(0, -4, 6, device=device)) @ Q.T  # max_cond=10 leaves it unconverged: recomputed
    cases = [(A, {"fallback": "always"}), (A, {"fallback": "auto"}), (slow, {"max_cond": 10.0}),
             (slow.expand(2, 6, 6), {"max_cond": 10.0})]
    for matrix, options in cases:
        expected = linalg.matrix_inverse_root(matrix, 2, 1e-6, **options)
        with torch.autocast(device, dtype=LOW):
            got = linalg.matrix_inverse_root(matrix, 2, 1e-6, **options)
        assert got.dtype == torch.float32, options
        torch.testing.assert_close(got, expected, msg=str(options))
