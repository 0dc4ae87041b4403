"""Family `fused`: relu_add against its reference, autograd, opcheck, compile, CUDA graphs, bad input."""
import os
import platform
import subprocess
import sys
import textwrap

import pytest
import torch

import loader
from conftest import TOLERANCES, check_dynamic_batch, needs_cuda, needs_graphs, needs_two_gpus, on_two_gpus, rerun_tests

fused = loader.load("fused")
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def _inputs(shape, dtype, device):
    return torch.randn(shape, dtype=dtype, device=device), torch.randn(shape, dtype=dtype, device=device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (1000, 33), (2, 3, 4, 5), (1 << 16) + 3])
def test_matches_reference(device, dtype, shape):
    x, y = _inputs(shape, dtype, device)
    atol, rtol = TOLERANCES[dtype]
    torch.testing.assert_close(fused.relu_add(x, y, 0.25), fused.reference.relu_add(x, y, 0.25), atol=atol, rtol=rtol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_non_contiguous_and_offset_inputs(device, dtype):
    base_x, base_y = _inputs((64, 130), dtype, device)
    x = base_x.t()[1:, :]           # transposed
    y = base_y[:, 1:].t()           # sliced then transposed: misaligned start
    out = fused.relu_add(x, y, -1.5)
    assert out.is_contiguous() and out.shape == x.shape
    atol, rtol = TOLERANCES[dtype]
    torch.testing.assert_close(out, fused.reference.relu_add(x, y, -1.5), atol=atol, rtol=rtol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["transposed", "channels_last", "y_contiguous"])
def test_a_dense_x_gives_the_output_its_layout(device, dtype, layout):
    """A dense x that is not contiguous (transposed, channels-last) gives the output its strides, as torch's
    relu(x) + y does, and is read in place: session 53's sweep found a transposed 2^24 x and y copied to
    contiguous first (299 us against torch.compile's 61 on an H200). y in another layout is copied into x's."""
    if layout == "channels_last":
        x, y = (torch.randn(2, 5, 3, 7, dtype=dtype, device=device).to(memory_format=torch.channels_last)
                for _ in range(2))
    else:
        x, y = (torch.randn(70, 33, dtype=dtype, device=device).t() for _ in range(2))
        if layout == "y_contiguous":
            y = y.contiguous()
    out = fused.relu_add(x, y, 0.75)
    expected = torch.relu(x) + y + 0.75
    assert out.stride() == expected.stride() == x.stride()
    atol, rtol = TOLERANCES[dtype]
    torch.testing.assert_close(out, fused.reference.relu_add(x, y, 0.75), atol=atol, rtol=rtol)
    # the Meta kernel (fake tensors: torch.compile, opcheck) gives the same strides
    with torch._subclasses.fake_tensor.FakeTensorMode() as mode:
        fake = fused.relu_add(mode.from_tensor(x), mode.from_tensor(y), 0.75)
    assert fake.stride() == out.stride()
    torch.library.opcheck(fused.ops.relu_add.default, (x, y, 0.75))


def test_float16_every_value_and_rounding_exact(device):
    # Every float16 bit pattern (subnormals, infinities, NaNs) through relu and back, and sums that
    # land anywhere in float16's range (and past it), rounded once to nearest even like torch.
    x = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16).to(device)
    out = fused.relu_add(x, torch.zeros_like(x), 0.0)
    torch.testing.assert_close(out, torch.relu(x.float()).half(), atol=0, rtol=0, equal_nan=True)
    g = torch.Generator().manual_seed(0)

    def spread(n):  # magnitudes from 2^-26 (below the smallest subnormal) to 2^17 (past the largest half)
        return torch.randn(n, generator=g).mul(torch.exp2(torch.randint(-26, 18, (n,), generator=g).float()))

    for bias in [0.0, 3.0000001, -65519.0, 65519.99, 6.1e-5]:
        a, b = spread(1 << 18).half().to(device), spread(1 << 18).half().to(device)
        expected = (torch.relu(a.float()) + b.float() + bias).half()
        torch.testing.assert_close(fused.relu_add(a, b, bias), expected, atol=0, rtol=0, equal_nan=True)


def test_float16_subnormals_survive_flush_denormal():
    """torch.set_flush_denormal(True) (the CPU's DAZ/FTZ modes, a speed setting) flushes float32 subnormals only.
    The scalar float16 -> float conversion (jk::widen_half, the loops' tails) rebiased a float16 subnormal through a
    float32 subnormal, so under DAZ such inputs read as 0 in the tail and exactly in the vector body: relu_add of
    seven float16 values of 3e-6 gave seven zeros (session 45's special-values review)."""
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU has no flush-denormal mode")
    try:
        for n in (7, 17, 33):  # all tail; tails of one and two vectors
            x = torch.full((n,), 3e-6, dtype=torch.float16)  # a float16 subnormal, a normal float32
            torch.testing.assert_close(fused.relu_add(x, torch.zeros_like(x), 0.0), x, atol=0, rtol=0)
        every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16)[:-3]  # odd length
        torch.testing.assert_close(fused.relu_add(every, torch.zeros_like(every), 0.0), torch.relu(every),
                                   atol=0, rtol=0, equal_nan=True)
    finally:
        torch.set_flush_denormal(False)


def test_bfloat16_every_value_and_rounding_exact(device):
    # The bfloat16 twin of the test above: every bit pattern through relu and back, then sums over
    # bfloat16's whole range (subnormals to past the largest value), rounded once to nearest even. An
    # odd length, so both the vector loop and its scalar tail run.
    x = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).to(device)
    out = fused.relu_add(x, torch.zeros_like(x), 0.0)
    torch.testing.assert_close(out, torch.relu(x.float()).bfloat16(), atol=0, rtol=0, equal_nan=True)
    g = torch.Generator().manual_seed(0)

    def spread(n):  # magnitudes from 2^-140 (below the smallest subnormal) to 2^127
        return torch.randn(n, generator=g).mul(torch.exp2(torch.randint(-140, 128, (n,), generator=g).float()))

    for bias in [0.0, 3.0000001, -3.3e38, 3.39e38, 1e-39]:
        a, b = spread((1 << 18) + 7).bfloat16().to(device), spread((1 << 18) + 7).bfloat16().to(device)
        expected = (torch.relu(a.float()) + b.float() + bias).bfloat16()
        torch.testing.assert_close(fused.relu_add(a, b, bias), expected, atol=0, rtol=0, equal_nan=True)


def test_16bit_cpu_loops_without_avx512():
    """On a CPU with AVX-512 the 16-bit elementwise loop runs in its AVX-512 form; JITKERNELS_CPU_AVX512=0
    selects the AVX2 form, which CPUs without AVX-512 run (16 bfloat16 values a vector, in the unpacks'
    order, packed back; 8 float16 values through F16C). The bit-exact tests above and ebm's separable
    models (the other users of the loop), on the CPU, again in a process with it set."""
    rerun_tests(["test_fused.py", "test_ebm.py"], "(every_value or local_energy_and_score) and cpu",
                {"JITKERNELS_CPU_AVX512": "0"}, timeout=900)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the AVX-512 switch exists on x86-64 only")
def test_the_avx512_switch_takes_the_loaders_words():
    """JITKERNELS_CPU_AVX512 was on unless exactly "0": "false" or "off" (which JITKERNELS_CUDA takes) ran
    the AVX-512 loop anyway, and a typo went unnoticed. It now reads the loader's words and names itself
    for anything else (read when a 16-bit loop first runs; the variable before the CPU check, so every
    x86-64 machine sees a typo)."""
    result = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import os, torch, loader
        x = torch.linspace(-3, 3, 1000).bfloat16()
        os.environ["JITKERNELS_CPU_AVX512"] = "maybe"
        try:
            loader.fused.relu_add(x, x)
        except ValueError as exc:
            print("ERROR", exc)
        os.environ["JITKERNELS_CPU_AVX512"] = " Off "
        print("EQUAL", torch.equal(loader.fused.relu_add(x, x), (torch.relu(x.float()) + x.float()).bfloat16()))
    """)], env=os.environ | {"PYTHONPATH": str(loader.REPO)}, capture_output=True, text=True, timeout=600)
    assert "ERROR JITKERNELS_CPU_AVX512 must be 0 or 1, got 'maybe'" in result.stdout, result.stdout + result.stderr
    assert "EQUAL True" in result.stdout, result.stdout + result.stderr


def test_every_element_written(device):
    # A length that is not a multiple of the vector width exercises the scalar tail.
    x, y = _inputs(4 * 1000 + 3, torch.float32, device)
    out = fused.relu_add(x, y)
    assert torch.equal(out, torch.relu(x) + y)


def test_nan_propagates_like_torch(device):
    x = torch.tensor([float("nan"), -1.0, 2.0], device=device)
    y = torch.zeros(3, device=device)
    out = fused.relu_add(x, y)
    assert torch.isnan(out[0]) and out[1] == 0 and out[2] == 2


def test_gradients_match_formula(device):
    x = torch.randn(50, dtype=torch.float64, device=device, requires_grad=True)
    y = torch.randn(50, dtype=torch.float64, device=device, requires_grad=True)
    g = torch.randn(50, dtype=torch.float64, device=device)
    fused.relu_add(x, y, 0.1).backward(g)
    torch.testing.assert_close(x.grad, g * (x > 0))
    torch.testing.assert_close(y.grad, g)


def test_gradients_with_the_default_bias(device):
    # The dispatcher drops trailing arguments equal to their defaults before the Autograd kernel:
    # loader.register_autograd must fill them back in (setup and backward see every input).
    x = torch.randn(30, dtype=torch.float64, device=device, requires_grad=True)
    y = torch.randn(30, dtype=torch.float64, device=device, requires_grad=True)
    out = fused.relu_add(x, y)
    assert "relu_add" in out.grad_fn.name()
    out.backward(torch.ones_like(out))
    torch.testing.assert_close(x.grad, (x > 0).double())
    torch.testing.assert_close(y.grad, torch.ones_like(y))


def test_needs_input_grad_is_per_input(device):
    x = torch.randn(30, dtype=torch.float64, device=device, requires_grad=True)
    y = torch.randn(30, dtype=torch.float64, device=device)
    (grad_x,) = torch.autograd.grad(fused.relu_add(x, y, 0.2).sum(), x)
    torch.testing.assert_close(grad_x, (x > 0).double())


def test_torch_compile_backward(device):
    @torch.compile(fullgraph=True)
    def f(a, b):
        return fused.relu_add(a * 2, b).sum()

    x, y = (t.requires_grad_() for t in _inputs((16, 8), torch.float32, device))
    f(x, y).backward()
    torch.testing.assert_close(x.grad, 2.0 * (x > 0).float())
    torch.testing.assert_close(y.grad, torch.ones_like(y))


def test_gradcheck(device):
    x = torch.randn(20, dtype=torch.float64, device=device, requires_grad=True)
    x = (x + 0.2 * torch.sign(x)).detach().requires_grad_()  # keep away from the kink at 0
    y = torch.randn(20, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: fused.relu_add(a, b, 0.3), (x, y))


def test_opcheck(device):
    x, y = _inputs((8, 5), torch.float32, device)
    torch.library.opcheck(fused.ops.relu_add.default, (x, y, 0.5))
    torch.library.opcheck(fused.ops.relu_add.default, (x.requires_grad_(), y, 0.5))


def test_torch_compile_fullgraph(device):
    @torch.compile(fullgraph=True)
    def f(a, b):
        return fused.relu_add(a * 2, b, 1.0).sum(dim=-1)

    x, y = _inputs((16, 8), torch.float32, device)
    torch.testing.assert_close(f(x, y), (torch.relu(x * 2) + y + 1.0).sum(dim=-1))


def test_dynamic_batch_compiles_once_and_exports(device):
    check_dynamic_batch(lambda a, b: fused.relu_add(a, b, 0.5) * 2,
                        lambda n: _inputs((n, 3), torch.float32, device))


def test_vmap_is_one_call(device):
    """torch.vmap of relu_add, with either input unbatched or batched along another dimension: one call on
    the batched tensors (torch's fallback called the op once per member and warned of a performance drop)."""
    from torch.profiler import ProfilerActivity, profile

    x, y = _inputs((5, 3, 4), torch.float32, device)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        both = torch.vmap(lambda a, b: fused.relu_add(a, b, 0.5))(x, y)
        x_only = torch.vmap(lambda a, b: fused.relu_add(a, b, 0.5), in_dims=(0, None))(x, y[0])
        other_dim = torch.vmap(lambda a, b: fused.relu_add(a, b, 0.5), in_dims=(1, 1))(x, y)
    calls = sum(event.name.endswith("::relu_add") for event in prof.events())
    assert calls == 6, f"{calls} calls of relu_add for 3 vmaps (one at the vmap level, one batched)"
    torch.testing.assert_close(both, torch.relu(x) + y + 0.5)
    torch.testing.assert_close(x_only, torch.relu(x) + y[0] + 0.5)
    torch.testing.assert_close(other_dim, (torch.relu(x) + y + 0.5).transpose(0, 1))
    grads = torch.func.vmap(torch.func.grad(lambda a, b: fused.relu_add(a, b).sum()), in_dims=(0, None))(x, y[0])
    torch.testing.assert_close(grads, (x > 0).float())


@needs_graphs
@needs_cuda
def test_cuda_graph_capture_and_replay():
    x, y = _inputs(1 << 20, torch.float32, "cuda")
    fused.relu_add(x, y)  # warm up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fused.relu_add(x, y, 0.5)
    for _ in range(2):
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, torch.relu(x) + y + 0.5)


@needs_cuda
def test_runs_on_current_device_and_stream():
    # x is written on the side stream behind a ~50 ms sleep (as conftest.on_two_gpus does on a second GPU): a
    # kernel on any other stream (the legacy default one included: PyTorch's side streams do not wait for it)
    # reads the NaN x holds before. (The test had computed x beforehand, so it could not fail.)
    x, y = _inputs(1 << 16, torch.float32, "cuda")
    stale = torch.full_like(x, float("nan"))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        torch.cuda._sleep(50_000_000)
        stale.copy_(x)
        out = fused.relu_add(stale, y)
    torch.cuda.current_stream().wait_stream(stream)
    torch.testing.assert_close(out, torch.relu(x) + y)


@needs_cuda
@needs_two_gpus
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_second_device_while_current_is_0(dtype):
    # tensors on cuda:1, the current device 0, cuda:1's current stream a side stream (conftest.on_two_gpus);
    # sizes for the vector path with a tail, and a misaligned (scalar) input
    for shape in [(1000, 33), (7,)]:
        x, y = _inputs(shape, dtype, "cpu")
        want, got = on_two_gpus(lambda a, b: fused.relu_add(a, b, 0.5), x, y)
        assert torch.equal(got, want)
    x = torch.randn(1001, dtype=dtype)
    want, got = on_two_gpus(lambda a, b: fused.relu_add(a[1:], b, 0.5), x, torch.randn(1000, dtype=dtype))
    assert torch.equal(got, want)


BAD_INPUTS = [
    ("integer dtype", lambda d: (torch.ones(3, dtype=torch.int32, device=d), torch.ones(3, dtype=torch.int32, device=d)), "x"),
    ("complex dtype", lambda d: (torch.ones(3, dtype=torch.complex64, device=d), torch.ones(3, dtype=torch.complex64, device=d)), "x"),
    ("mismatched shapes", lambda d: (torch.ones(3, device=d), torch.ones(4, device=d)), "y"),
    ("mismatched dtypes", lambda d: (torch.ones(3, device=d), torch.ones(3, dtype=torch.float64, device=d)), "y"),
]


@pytest.mark.parametrize("case,make,argument", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_names_the_argument(device, case, make, argument):
    x, y = make(device)
    with pytest.raises((RuntimeError, ValueError), match=rf"\b{argument}\b"):
        fused.relu_add(x, y)


@needs_cuda
def test_cpu_tensor_with_cuda_tensor_names_the_argument():
    with pytest.raises((RuntimeError, ValueError), match=r"\by\b.*cpu"):
        fused.relu_add(torch.ones(3, device="cuda"), torch.ones(3))
    with pytest.raises((RuntimeError, ValueError), match=r"cuda"):
        fused.relu_add(torch.ones(3), torch.ones(3, device="cuda"))


# ---------------------------------------------------------------- the sampling/fused review

def test_bias_as_a_0_dim_tensor_in_eager_and_under_compile(device):
    """A 0-d tensor bias worked eagerly (read as a number) but failed under torch.compile(fullgraph=True)
    ("Expected a value of type 'float' for argument 'bias'"); both now match the reference."""
    x, y = _inputs((16, 8), torch.float32, device)
    bias = torch.tensor(0.75, dtype=torch.float64, device=device)
    expected = fused.reference.relu_add(x, y, bias)
    torch.testing.assert_close(fused.relu_add(x, y, bias), expected)
    compiled = torch.compile(lambda a, b, c: fused.relu_add(a, b, c), fullgraph=True)
    torch.testing.assert_close(compiled(x, y, bias), expected)


def test_bias_tensor_that_requires_grad_gets_its_gradient(device):
    """A learnable 0-d bias: its gradient was silently dropped (the tensor was read as a number)."""
    x, y = (t.requires_grad_() for t in _inputs(20, torch.float64, device))
    bias = torch.tensor(0.3, dtype=torch.float64, device=device, requires_grad=True)
    g = torch.randn(20, dtype=torch.float64, device=device)
    grads = torch.autograd.grad(fused.relu_add(x, y, bias), (x, y, bias), g)
    torch.testing.assert_close(grads[0], g * (x > 0))
    torch.testing.assert_close(grads[1], g)
    torch.testing.assert_close(grads[2], g.sum())


def test_bias_tensor_keeps_its_gradient_through_fx_symbolic_trace(device):
    """torch.fx.symbolic_trace gives a tensor bias as a Proxy, which relu_add took for a number until session 45:
    the graph passed the tensor to the schema's float, so a learnable bias's gradient was dropped in silence."""
    class Module(torch.nn.Module):
        def forward(self, a, b, c):
            return fused.relu_add(a, b, c)

    traced = torch.fx.symbolic_trace(Module())
    x, y = _inputs(20, torch.float64, device)
    bias = torch.tensor(0.3, dtype=torch.float64, device=device, requires_grad=True)
    out = traced(x, y, bias)
    torch.testing.assert_close(out, fused.reference.relu_add(x, y, bias))
    g = torch.randn(20, dtype=torch.float64, device=device)
    torch.testing.assert_close(torch.autograd.grad(out, bias, g)[0], g.sum())


@pytest.mark.parametrize("bias", [torch.tensor([0.5]), torch.ones(3), torch.tensor(1j)], ids=["shape (1,)", "shape (3,)", "complex"])
def test_bias_tensor_that_is_not_a_real_0_dim_names_bias(device, bias):
    """A (1,) bias was read silently as a number; every tensor bias but a real 0-d one is refused, naming bias."""
    x, y = _inputs(3, torch.float32, device)
    with pytest.raises((TypeError, ValueError), match=r"\bbias\b"):
        fused.relu_add(x, y, bias.to(device))


# ---------------------------------------------------------------- session 46's mutation review

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gradient_at_exactly_zero_is_zero_as_torch_relu(device, dtype):
    """grad_x = grad * (x > 0): 0 where x is exactly 0 (or -0), as torch.relu's backward. The other tests draw
    randn, which never hits 0, so a backward that masked x < 0 instead passed them all."""
    x = torch.tensor([0.0, -0.0, 1.0, -1.0], dtype=dtype, device=device, requires_grad=True)
    y = torch.zeros(4, dtype=dtype, device=device)
    (grad_x,) = torch.autograd.grad(fused.relu_add(x, y, 0.5).sum(), x)
    xr = x.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(fused.reference.relu_add(xr, y, 0.5).sum(), xr)
    torch.testing.assert_close(grad_x, want, rtol=0, atol=0)
    torch.testing.assert_close(grad_x, torch.tensor([0.0, 0.0, 1.0, 0.0], dtype=dtype, device=device), rtol=0, atol=0)


@pytest.mark.parametrize("n", [7, 17])  # all tail; a vector and its tail
def test_float16_tail_rounds_ties_to_even(device, n):
    """The scalar tail of the float16 loop narrows with jk::narrow_half. The every-value test's sums have lengths
    that are multiples of the vector width, so a narrow_half that rounded ties away from zero passed it:
    2048 + 1 lies halfway between float16's 2048 and 2050 and must round to the even 2048, as torch does."""
    for x_value, want in ((2048.0, 2048.0), (2050.0, 2052.0)):
        x = torch.full((n,), x_value, dtype=torch.float16, device=device)
        y = torch.ones(n, dtype=torch.float16, device=device)
        out = fused.relu_add(x, y, 0.0)
        expected = (torch.relu(x.float()) + y.float()).half()
        torch.testing.assert_close(out, expected, atol=0, rtol=0)
        assert (out == want).all(), (x_value, out)
