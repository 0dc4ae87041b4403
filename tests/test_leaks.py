"""Leaks in a long-running process (a notebook training for hours, long chains, repeated loader.reload).

Each op case runs a call many times and checks that the second window of calls (after a warm-up window of
as many) leaves nothing behind: no live torch.Tensor, no Python object tracked by the collector, no Python
heap (tracemalloc), no resident memory (/proc/self/statm, with tensors of 64 kB, so that one tensor kept per
call in C++, invisible to Python, shows as megabytes), and no tensor freed only by the cyclic collector (a
tensor in a reference cycle, such as an output stored on an autograd ctx, waits for gc: large ones pile up
between collections). The loader cases check its registries across reloads: an unchanged reload adds
nothing; a reload of an edited family adds exactly one build (its library, ops module and namespace stay
loaded by design, so that functions taken out of the family keep working) and no file handle.
Session 48's leak review found none of these growing; the cases cover the ops that save tensors for
backward, the forward-mode and torch.func paths, the drawing ops with a generator, cem_minimize,
Shampoo.step, per_sample_grads (its forward hooks), a torch.compile'd call, and the loader's registries."""
import copyreg
import gc
import os
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest
import torch

import loader

if not sys.platform.startswith("linux"):
    pytest.skip("reads /proc/self", allow_module_level=True)

REPO = Path(loader.__file__).parent
PAGE = os.sysconf("SC_PAGE_SIZE")
CALLS = 100           # calls per window
MAX_OBJECTS = 10      # collector-tracked objects the second window may add (one per call is 100)
MAX_HEAP = 128 << 10  # Python heap bytes it may add (a leak of ~1.3 kB a call exceeds it). Not less: torch.func
                      # calls turn over a cache of torch's that tracemalloc sees as ~50 kB a window, plain torch too
MAX_RSS = 3 << 20     # resident bytes it may add: one 64 kB tensor kept per call is 6.4 MB
B, D = 256, 64        # x is (B, D) float32: 64 kB


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


def _tensors(objects) -> int:
    """How many of objects are tensors. type(), not isinstance: some lazily imported torch modules warn when
    their __class__ is asked for."""
    return sum(issubclass(type(o), torch.Tensor) for o in objects)


def _live() -> tuple[int, int]:
    """(live tensors, objects tracked by the collector), after a collection."""
    gc.collect()
    objects = gc.get_objects()
    return _tensors(objects), len(objects)


def _tensors_in_cycles(fn, calls: int) -> int:
    """Tensors that only the cyclic collector frees, left by `calls` calls of fn."""
    gc.collect()
    gc.disable()
    try:
        for _ in range(calls):
            fn()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        return _tensors(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def assert_no_growth(fn, calls: int = CALLS) -> None:
    """2 * calls calls of fn to warm up (lazy imports, torch's caches, the allocator's arenas), then a window of
    `calls` calls that must leave nothing."""
    for _ in range(2 * calls):
        fn()
    tensors0, objects0 = _live()
    tracemalloc.start()
    try:
        heap0, rss0 = tracemalloc.get_traced_memory()[0], _rss()
        for _ in range(calls):
            fn()
        gc.collect()
        heap = tracemalloc.get_traced_memory()[0] - heap0
    finally:
        tracemalloc.stop()
    rss = _rss() - rss0
    tensors, objects = (b - a for a, b in zip((tensors0, objects0), _live()))
    growth = f"{calls} calls left {tensors} tensors, {objects} objects, {heap} heap bytes, {rss} resident bytes"
    assert tensors <= 0 and objects <= MAX_OBJECTS and heap <= MAX_HEAP and rss <= MAX_RSS, growth
    cycles = _tensors_in_cycles(fn, 20)
    assert cycles == 0, f"20 calls left {cycles} tensors that only the cyclic collector frees"


# ---------------------------------------------------------------- ops

def _x(requires_grad=False):
    return torch.randn(B, D).requires_grad_(requires_grad)


def _score_matching(energy):
    """A backward of the gradient of an energy (create_graph=True), as score matching takes."""
    x = _x(True)

    def call():
        g, = torch.autograd.grad(energy(x).sum(), x, create_graph=True)
        (g * g).sum().backward()
    return call


def case_relu_add_backward():
    x, y = _x(True), _x()
    return lambda: loader.fused.relu_add(x, y, 0.5).sum().backward()


def case_relu_add_forward_mode():
    x, y = _x(), _x()
    return lambda: torch.func.jvp(lambda a: loader.fused.relu_add(a, y, 0.5), (x,), (y,))


def case_energy_double_backward():
    return _score_matching(loader.ebm.double_well_energy)


def case_score_double_backward():  # the score's backward: vjp_by_autograd with create_graph
    return _score_matching(lambda a: (loader.ebm.ackley_score(a) ** 2).sum(1))


def case_gaussian_score_double_backward_three_in_graph():  # _vjp_by_functorch from a plain backward
    mean, precision = torch.randn(D, requires_grad=True), torch.eye(D).requires_grad_()
    return _score_matching(lambda a: (loader.ebm.gaussian_score(a, mean, precision) ** 2).sum(1))


def case_per_sample_energy_gradients_vmap_grad():
    x = _x()[:16]
    return lambda: torch.vmap(torch.func.grad(lambda a: loader.ebm.rosenbrock_energy(a[None]).sum()))(x)


def case_energy_hessian_vector_product():
    x, v = _x()[:16], _x()[:16]
    return lambda: torch.func.jvp(torch.func.grad(lambda a: loader.ebm.double_well_energy(a).sum()), (x,), (v,))


def case_langevin_step_clamped_backward_with_generator():  # saves its output
    x, grad, generator = _x(True), _x(), torch.Generator().manual_seed(0)
    return lambda: loader.ebm.langevin_step(x, grad, 0.01, clamp=1.0, generator=generator).sum().backward()


def case_chains_with_generator():
    x, generator = _x(), torch.Generator().manual_seed(0)
    mean, precision = torch.zeros(D), torch.eye(D)

    def call():
        loader.ebm.langevin_chain(x, "double_well", 2, 0.01, thin=1, generator=generator)
        loader.ebm.hmc_chain(x, "gaussian", 2, 0.01, 2, thin=1, generator=generator, mean=mean, precision=precision)
    return call


def case_normal_out_and_vmap_same_with_generator():
    mean, out, generator = torch.zeros(D), torch.empty(B, D), torch.Generator().manual_seed(0)

    def call():
        loader.sampling.normal(mean, 1.0, B, out=out, generator=generator)
        torch.vmap(lambda m: loader.sampling.normal(m, 1.0, 4, generator=generator), randomness="same")(out[:3])
    return call


def case_cem_minimize():
    mean, generator = torch.zeros(D), torch.Generator().manual_seed(0)
    return lambda: loader.sampling.cem_minimize(lambda z: (z * z).sum(1), mean, 1.0, B, 16, 2, generator=generator)


def case_diffusion_steps_backward():
    d = loader.diffusion
    schedule, generator = d.ddpm_schedule(50), torch.Generator().manual_seed(0)
    m, x = torch.randn(16, 16, D, requires_grad=True), torch.randn(16, 16, D, requires_grad=True)
    t = torch.tensor(10)

    def call():
        d.ddpm_step(m, t, x, schedule, generator=generator).sum().backward()
        d.ddim_step(m, 10, 4, x, schedule, eta=0.3, generator=generator).sum().backward()
    return call


def case_conv1d_gn_mish_backward():
    x = torch.randn(8, 16, D, requires_grad=True)
    weight, bias = torch.randn(32, 16, 3, requires_grad=True), torch.randn(32, requires_grad=True)
    gn_weight, gn_bias = torch.ones(32, requires_grad=True), torch.zeros(32, requires_grad=True)
    return lambda: loader.diffusion.conv1d_gn_mish(x, weight, bias, gn_weight, gn_bias, 4).sum().backward()


def case_matrix_inverse_root_routes():
    a = torch.randn(64, 64)
    spd = (a @ a.T / 64 + torch.eye(64)).requires_grad_()
    a = torch.randn(128, 128, dtype=torch.float64)
    large = a @ a.T / 128 + torch.eye(128, dtype=torch.float64)  # the CPU's eigh route
    unconverged = torch.stack([spd.detach(), torch.diag(torch.logspace(0, 9, 64))])  # "auto" redoes one with eigh

    def call():
        loader.linalg.matrix_inverse_root(spd).sum().backward()
        loader.linalg.matrix_inverse_root(large)
        loader.linalg.matrix_inverse_root(unconverged, max_cond=10.0)
    return call


def case_kron_and_per_sample_grad_linear_backward():
    a, b = torch.randn(16, 16, requires_grad=True), torch.randn(16, 16, requires_grad=True)
    x, g = torch.randn(B, D, requires_grad=True), torch.randn(B, 32, requires_grad=True)

    def call():
        loader.linalg.kron(a, b).sum().backward()
        loader.linalg.per_sample_grad_linear(x, g)[0].sum().backward()
    return call


def case_per_sample_grads():
    model = torch.nn.Sequential(torch.nn.Linear(D, 32), torch.nn.Tanh(), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4))
    inputs, targets = torch.randn(16, D), torch.randn(16, 4)

    def call():
        loader.linalg.per_sample_grads(model, torch.nn.functional.mse_loss, inputs, targets)
        assert not any(module._forward_hooks for module in model.modules())  # its hooks are removed
    return call


def case_shampoo_step():
    model = torch.nn.Sequential(torch.nn.Linear(D, 48), torch.nn.Linear(48, 8))
    optimizer = loader.linalg.Shampoo(model.parameters(), block_size=32, update_freq=2)
    inputs = torch.randn(32, D)

    def call():
        optimizer.zero_grad()
        model(inputs).square().sum().backward()
        optimizer.step()
    return call


OP_CASES = {name.removeprefix("case_"): value for name, value in globals().items() if name.startswith("case_")}


@pytest.mark.parametrize("case", OP_CASES)
def test_leaks_a_long_loop_of_an_op_keeps_nothing(case):
    torch.manual_seed(0)
    assert_no_growth(OP_CASES[case]())


@pytest.mark.slow
def test_leaks_a_long_loop_of_a_compiled_call_keeps_nothing():
    x, y = _x(True), _x()
    step = torch.compile(lambda a, b: loader.ebm.langevin_step(loader.fused.relu_add(a, b, 0.5), b, 0.01), fullgraph=True)
    assert_no_growth(lambda: step(x, y).sum().backward())


# ---------------------------------------------------------------- the loader

def _loader_registries() -> dict:
    return {"sys.modules": len(sys.modules), "_libraries": len(loader._libraries),
            "_loaded_namespaces": len(loader._loaded_namespaces), "_families": len(loader._families),
            "copyreg": len(copyreg.dispatch_table), "pytree": len(torch.utils._pytree.SUPPORTED_NODES),
            "torch.ops libraries": len(torch.ops.loaded_libraries), "file handles": len(os.listdir("/proc/self/fd")),
            "mappings": sum(1 for _ in open("/proc/self/maps"))}


def test_leaks_an_unchanged_reload_adds_nothing():
    x = torch.randn(4, 3, requires_grad=True)

    def reload_and_use():
        for name in ("sampling", "ebm"):  # sampling registers a class (copyreg) and a pytree node per build
            loader.reload(name)
        loader.ebm.double_well_score(x).sum().backward()  # runs the reloaded reference.py anew
        loader.sampling.cem_minimize(lambda z: z.square().sum(1), torch.zeros(3), 1.0, 8, 2, 1)

    reload_and_use()
    before, objects = _loader_registries(), _live()[1]
    for _ in range(20):
        reload_and_use()
    after = _loader_registries()
    assert after == before, {k: after[k] - before[k] for k in before if after[k] != before[k]}
    assert _live()[1] - objects <= MAX_OBJECTS


SCRATCH_CPP = """#include "jk.h"
at::Tensor twice(const at::Tensor& x) { return x.mul(2); }
JK_LIBRARY(m) { m.def("twice(Tensor x) -> Tensor"); }
JK_LIBRARY_IMPL(CPU, m) { m.impl("twice", &twice); }
"""
SCRATCH_OPS = """import torch
_ops = getattr(torch.ops, NAMESPACE)
__all__ = ["twice", "Box"]
class Box:  # a class in ops.py: the loader registers its pickling per build
    pass
def twice(x):
    return _ops.twice(x)
"""


@pytest.mark.slow
def test_leaks_each_edited_reload_adds_one_build_and_no_file_handle(tmp_path):
    """Builds of edited sources stay loaded by design (functions taken out of the family keep the old build):
    each adds one library, one ops module and one namespace, and nothing else piles up."""
    family = tmp_path / "kernels" / "scratch"
    family.mkdir(parents=True)
    (family / "scratch.cpp").write_text(SCRATCH_CPP)
    (family / "ops.py").write_text(SCRATCH_OPS)
    code = textwrap.dedent("""
        import pathlib, sys, torch, loader
        sys.path.insert(0, TESTS)
        from test_leaks import _loader_registries
        ops = pathlib.Path(OPS)
        f = loader.load("scratch")
        def edit_and_reload(i):
            ops.write_text(ops.read_text() + f"# edit {i}\\n")
            loader.reload("scratch")
            assert f.twice(torch.ones(1)).item() == 2
        edit_and_reload(0)  # the first rebuild imports loader_build and what it needs
        before = _loader_registries()
        for i in range(1, 6):
            edit_and_reload(i)
            after = _loader_registries()
            grew = {k: after[k] - before[k] for k in before if after[k] != before[k]}
            mappings = grew.pop("mappings", 0)
            assert grew == dict.fromkeys(["sys.modules", "_loaded_namespaces", "copyreg", "torch.ops libraries"], i), \
                (i, grew)
            assert mappings <= 8 * i, (i, mappings)  # one library's segments a build
        print("ok")
    """).replace("TESTS", repr(str(REPO / "tests"))).replace("OPS", repr(str(family / "ops.py")))
    env = dict(os.environ, JITKERNELS_ROOT=str(tmp_path / "kernels"), JITKERNELS_CACHE=str(tmp_path / "cache"),
               JITKERNELS_CUDA="0", PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-3000:]
