"""Gaussian sampling and the cross-entropy method (CEM).

normal: (n, d) independent draws from N(mean_j, std_j^2), Philox counters from PyTorch's generator
(reproducible under torch.manual_seed, safe to capture in a CUDA graph).
cem_update: refit mean and std on the elite of a scored population, with no host sync.
cem_minimize: the whole CEM loop for any batched objective.
Shapes for fake tensors (torch.compile, opcheck) come from the ops' Meta kernels in sampling.cpp.
"""
import math
import numbers
import warnings
from typing import Callable, NamedTuple

import torch
import torch.distributed as dist

NAMESPACE: str  # the build's op namespace, set by loader.py before this file runs
register_drawing_vmap: Callable  # loader.register_drawing_vmap: vmap's randomness for an op that draws
check_numbers: Callable      # loader.check_numbers: refuses a float argument given as a tensor with a derivative
_ops = getattr(torch.ops, NAMESPACE)
register_drawing_vmap(f"{NAMESPACE}::normal")
register_drawing_vmap(f"{NAMESPACE}::normal_out", in_place=True)

__all__ = ["normal", "cem_update", "cem_minimize", "distributed_cem_minimize", "CEMResult"]


def normal(mean: torch.Tensor, std: torch.Tensor, n: int, *, dtype: torch.dtype | None = None,
           out: torch.Tensor | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """Samples of shape (n, d): element [i, j] = mean[j] + std[j] * z[i, j], every z an independent N(0, 1).

    mean, std: (d,) tensors of one float dtype and device, or either one a Python number for every dimension
    (as torch.normal takes; both numbers only with out, whose rows give d). dtype: output float32, float64, float16 or
    bfloat16 (default: mean's dtype). The normals are float32 Box-Muller draws from Philox4x32-10
    (the radius's uniform from 23 bits, so |z| <= 5.65; 16-bit uniforms for float16/bfloat16 outputs,
    whose |z| then stays below 4.86);
    mean + std * z is computed in float64 for a float64 output, else float32.
    out: a contiguous (n, d) tensor to write into instead (dtype is then out's). A negative or NaN std
    raises on the CPU; on CUDA (no host sync allowed) its column comes out NaN. Not differentiable: the
    samples never require grad (torch.randn's convention). For a reparameterized sample that carries
    gradients to mean and std, use mean + std * normal(zeros, ones, n).
    generator (keyword-only): a torch.Generator on mean's device; default: the device's default generator,
    so torch.manual_seed reproduces the draws.
    """
    mean, std = _per_dimension(mean, std, out)
    if out is not None:
        if out.dim() != 2 or out.shape[0] != n:
            d = mean.shape[-1] if mean.dim() else "d"  # a 0-d mean is the op's error to name
            raise ValueError(f"out must have shape (n, d) = ({n}, {d}), got {tuple(out.shape)}")
        if dtype is not None and dtype != out.dtype:
            raise ValueError(f"dtype {dtype} differs from out's dtype {out.dtype}")
        _ops.normal_out(mean, std, out=out, generator=generator)
        return out
    return _ops.normal(mean, std, n, dtype=dtype, generator=generator)


def cem_update(samples: torch.Tensor, scores: torch.Tensor, n_elite: int, mean: torch.Tensor,
               std: torch.Tensor, smoothing: float = 0.0, min_std: float = 0.0,
               maximize: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """One CEM refit: the mean and population std (divided by n_elite) of the n_elite best rows.

    samples (n, d), scores (n,), mean and std (d,) (samples' dtype). Best = lowest score, or highest
    when maximize; NaN scores rank last and ties go to the lower row index (like a stable sort).
    Returns (smoothing * mean + (1 - smoothing) * elite_mean,
             max(smoothing * std + (1 - smoothing) * elite_std, min_std)).
    dtypes: samples float32, float64, float16 or bfloat16 (the CPU sums in float64; CUDA sums x - x0 in
    float32 per range of elite rows, x0 the range's first, and merges the ranges in float64; float64 samples
    stay float64);
    scores any of those. A negative std raises on the CPU; on CUDA (no host sync) its column's new std is
    NaN, as in normal. Not differentiable: the outputs never require grad (a selection).
    """
    check_numbers(smoothing=smoothing, min_std=min_std)
    return _ops.cem_update(samples, scores, n_elite, mean, std, smoothing, min_std, maximize)


class CEMResult(NamedTuple):
    mean: torch.Tensor       # final mean (d,)
    std: torch.Tensor        # final std (d,)
    best_x: torch.Tensor     # best sample seen (d,)
    best_value: torch.Tensor  # its score, 0-d
    history: torch.Tensor    # best score of each iteration's population (n_iters,), the scores' dtype


# torch.export.save of a program returning a CEMResult needs a name for its tree spec (a namedtuple without one
# raised "Can't serialize TreeSpec of namedtuple class"); the build's namespace keeps a reloaded family's class
# apart, as the program's ops are that build's.
torch.utils._pytree._register_namedtuple(CEMResult, serialized_type_name=f"jitkernels.{NAMESPACE}.CEMResult")


def _keep_best(best_value, best_x, value, x, maximize):
    """The better of (best_value, best_x) and (value, x), chosen on the device (no host sync). A NaN best
    loses to anything (NaN ranks last, as in cem_update): a first population scored all NaN had kept
    best_value NaN for good, since nothing compares below NaN (session 40's review)."""
    if best_value is None:
        return value, x
    better = best_value.isnan() | ((value > best_value) if maximize else (value < best_value))
    return torch.where(better, value, best_value), torch.where(better, x, best_x)


def _lower_is_better(scores: torch.Tensor, maximize: bool) -> torch.Tensor:
    """The scores as cem_update ranks them: lowest first, or negated when maximizing."""
    return -scores if maximize else scores


def _ranked(scores: torch.Tensor, maximize: bool) -> torch.Tensor:
    """Row indices, best first, in cem_update's order: NaN last, ties to the lower row (torch.sort puts NaN after
    +inf). torch.nan_to_num(nan=inf) had also turned +-inf into +-finfo.max, so an infinite score tied with the
    largest finite one and the lower row won: best_x and the distributed elite could be a worse row."""
    return torch.sort(_lower_is_better(scores, maximize), stable=True).indices


def _best_row(scores: torch.Tensor, maximize: bool) -> torch.Tensor:
    """_ranked(scores, maximize)[:1] as an argmin. In float64, nan_to_num puts a float32/16-bit score's +-inf at
    +-float64.max, beyond every finite score, and NaN at +inf, after them all: argmin's first minimum is then
    cem_update's pick (NaN last, ties to the lower row). (float64 scores: +-inf ties with +-float64.max, which
    no objective returns.) The sort cost 68 us per iteration at n = 65536 on an H200, and a five-kernel exact
    pick 21-66 us (session 43, calls 2 and 4)."""
    key = _lower_is_better(scores, maximize).to(torch.float64)
    return torch.nan_to_num(key, nan=math.inf).argmin().view(1)


def _check_population(n_samples: int, n_elite: int, n_iters: int, world: int = 1) -> None:
    """Before fn is first called: n_samples=0 failed in argmin, and n_elite > n_samples after a whole fn call (so
    did n_elite=2.0 and n_iters=2.5, in errors that named no argument, until session 52)."""
    for name, value in (("n_samples", n_samples), ("n_elite", n_elite), ("n_iters", n_iters)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if n_iters < 1:
        raise ValueError(f"n_iters must be >= 1, got {n_iters}")
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    if not 1 <= n_elite <= world * n_samples:
        total = "n_samples" if world == 1 else "world_size * n_samples"
        raise ValueError(f"n_elite must be in 1..{total} = {world * n_samples}, got {n_elite}")


def _check_refit(smoothing: float, min_std: float) -> None:
    """cem_update's ranges, before fn is first called (cem_update raised only after a whole fn call). Not while
    torch.compile traces: cem_update's fake kernel then refuses them, by name, before anything runs (a raise
    here reached a fullgraph caller as dynamo's bare "Observed exception")."""
    if torch.compiler.is_compiling():
        return
    check_numbers(smoothing=smoothing, min_std=min_std)
    if not 0.0 <= smoothing <= 1.0:
        raise ValueError(f"smoothing must be in [0, 1], got {smoothing}")
    if not 0.0 <= min_std < math.inf:  # NaN fails too
        raise ValueError(f"min_std must be a finite number >= 0, got {min_std}")


def _check_mean(mean) -> None:
    """mean's shape sizes the samples before any op sees it (a list raised "'list' object has no attribute")."""
    if not isinstance(mean, torch.Tensor):
        raise TypeError(f"mean must be a tensor of shape (d,), got {type(mean).__name__}")
    if mean.dim() != 1:  # a 0-d mean raised "tuple index out of range" from mean.shape[0]
        raise ValueError(f"mean must have shape (d,), got shape {list(mean.shape)}")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _per_dimension(mean, std, out: torch.Tensor | None = None):
    """mean and std as the ops take them: a Python number is every dimension's value, a tensor like the other one
    (normal(mean, 1.0, n) raised the schema error of the internal op, naming std; cem_minimize(std=1.0) that of
    normal_out). Two numbers take d, the dtype (float64 for a float64 out, else float32) and the device from out;
    without out nothing gives d, and they are refused by name."""
    if _is_number(mean) and _is_number(std):
        if out is None or out.dim() != 2:
            raise TypeError(f"mean and std are both numbers ({mean}, {std}), which leaves d unknown: pass either one "
                            f"as a (d,) tensor, e.g. torch.full((d,), {std}), or an (n, d) out")
        like = torch.empty(out.shape[1], dtype=torch.float64 if out.dtype == torch.float64 else torch.float32,
                           device=out.device)
        return torch.full_like(like, mean), torch.full_like(like, std)
    if _is_number(std) and isinstance(mean, torch.Tensor):
        std = _full_like(mean, std, "std")
    elif _is_number(mean) and isinstance(std, torch.Tensor):
        mean = _full_like(std, mean, "mean")
    return mean, std


def _full_like(tensor: torch.Tensor, value, name: str) -> torch.Tensor:
    """value in every entry, in tensor's float dtype (float32 beside an integer tensor, so that the op's dtype error
    names the tensor the caller gave, not the number)."""
    dtype = tensor.dtype if tensor.is_floating_point() else torch.float32
    try:
        return torch.full_like(tensor, value, dtype=dtype)
    except RuntimeError:  # torch's "value cannot be converted to type c10::Half without overflow" named nothing
        raise ValueError(f"{name}={value!r} does not fit {str(dtype).removeprefix('torch.')}, the dtype of the other "
                         f"of mean and std, which a number takes") from None


def _detached(mean, std):
    """CEM draws and refits without gradients (cem_update's outputs never require grad), so the loop runs on the
    values: a mean or std that required grad (a network's output, an nn.Parameter) made normal's out= raise.
    A number std is every dimension's (_per_dimension)."""
    mean, std = _per_dimension(mean, std)
    return mean.detach(), (std.detach() if isinstance(std, torch.Tensor) else std)


_SCORE_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)  # cem_update's


def _check_scores(scores, n_samples: int, device: torch.device) -> None:
    """fn's output, before it is indexed: (n_samples, d) scores raised "index out of range in self", integer ones
    cem_update's "scores must be float32, ...", and scores on another device than the samples (a CPU objective
    for CUDA samples) its "scores is on cpu but samples is on cuda:0", naming an argument the caller never passed."""
    if not isinstance(scores, torch.Tensor):
        raise TypeError(f"fn must return a tensor of shape (n_samples,) = ({n_samples},), got {type(scores).__name__}")
    if scores.dtype not in _SCORE_DTYPES:
        raise TypeError(f"fn must return floating-point scores (float32, float64, float16 or bfloat16), got "
                        f"{str(scores.dtype).removeprefix('torch.')}: convert them, e.g. fn(x).float()")
    if scores.shape != (n_samples,):
        raise ValueError(f"fn must return one score per sample, shape (n_samples,) = ({n_samples},), "
                         f"got shape {list(scores.shape)}")
    if scores.device != device:
        raise ValueError(f"fn must return scores on the samples' device {device}, got scores on {scores.device}: "
                         f"move them, e.g. fn(x).to(x.device)")


def cem_minimize(fn: Callable[[torch.Tensor], torch.Tensor], mean: torch.Tensor, std: torch.Tensor,
                 n_samples: int, n_elite: int, n_iters: int, *, smoothing: float = 0.0,
                 min_std: float = 0.0, maximize: bool = False,
                 generator: torch.Generator | None = None, cuda_graph: bool = False) -> CEMResult:
    """Minimise (or maximise) a batched objective fn((n_samples, d)) -> (n_samples,) by CEM.

    Each iteration: draw n_samples from N(mean, diag std^2) into one reused buffer, score them,
    refit on the n_elite best (see cem_update), and track the best sample seen. Nothing syncs with
    the host, so the whole call can be captured as one CUDA graph when fn can. mean and std are taken as
    values: no gradient flows back to them (a mean that requires grad, e.g. a network's output, is fine).
    std: a (d,) tensor like mean, or a number for every dimension. generator (keyword-only): as normal's.
    cuda_graph (keyword-only): on CUDA, the loop's own work after fn (the best row, the best so far, the
    history and cem_update: ~13 ops) is captured once and replayed each iteration as one CUDA graph, so an
    iteration costs little more than its kernels' time (d = 1000, 8192 samples, 200 iterations on an H200:
    94 us an iteration against 272-290 us without it; examples/cem_optimize.py). The draws and fn run as
    usual, so fn may be anything, host syncs included, and the results are the same numbers as without it.
    The last graph of each device is kept, and the next call reuses its memory pool (the refit's temporaries:
    ~16 bytes a sample, plus cem_update's scratch). No effect on the CPU, under torch.compile or inside a
    capture the caller runs. Other threads may launch and allocate during the capture, but a device-wide
    synchronize in one makes it fail: that call then warns and runs without the graph (the same numbers), and the
    next call captures anew. On torch 2.11 another thread's draw from the default CUDA generator during the capture
    raises in that thread ("Offset increment outside graph capture": torch marks that generator as capturing for any
    capture): give such threads a torch.Generator of their own.
    """
    _check_population(n_samples, n_elite, n_iters)
    _check_refit(smoothing, min_std)
    _check_mean(mean)
    mean, std = _detached(mean, std)
    samples = torch.empty((n_samples, mean.shape[0]), dtype=mean.dtype, device=mean.device)

    def draw_and_score(mean, std):
        normal(mean, std, n_samples, out=samples, generator=generator)
        scores = fn(samples)
        _check_scores(scores, n_samples, samples.device)
        # Values: scores that require grad (a network called without no_grad) chained every iteration's graph
        # into best_value and history (memory growing with n_iters, a backward raising on the reused samples)
        return scores.detach()

    def refit(scores, mean, std):
        """The best row's (score, sample) and the refitted (mean, std)."""
        i = _best_row(scores, maximize)
        value, x = scores.index_select(0, i).squeeze(0), samples.index_select(0, i).squeeze(0)
        return value, x, *cem_update(samples, scores, n_elite, mean, std, smoothing, min_std, maximize)

    scores = draw_and_score(mean, std)
    best_value, best_x, mean, std = refit(scores, mean, std)
    history = torch.empty(n_iters, dtype=best_value.dtype, device=best_value.device)  # the scores' dtype
    history[0] = best_value
    if cuda_graph and n_iters > 1 and mean.is_cuda and not _capturing():
        result = CEMResult(mean, std, best_x, best_value, history)
        if _iterate_with_graphed_refits(draw_and_score, refit, scores, result, maximize):
            return result
    for it in range(1, n_iters):
        value, x, mean, std = refit(draw_and_score(mean, std), mean, std)
        best_value, best_x = _keep_best(best_value, best_x, value, x, maximize)
        history[it] = value
    return CEMResult(mean, std, best_x, best_value, history)


def _capturing() -> bool:
    """Whether cem_minimize runs under torch.compile's tracing or inside a CUDA graph capture: it then runs as plain
    ops."""
    return torch.compiler.is_compiling() or torch.cuda.is_current_stream_capturing()


# Per CUDA device: the stream cem_minimize(cuda_graph=True) captures on, the last graph it captured, an event after
# that graph's last replay, and the memory pool the next capture shares (the last graph's: torch's graph.pool()). A
# graph of its own per call would leave one pool per call behind, which the caching allocator frees only on an
# out-of-memory retry or empty_cache: a planner calling cem_minimize every step would grow its reserved memory at every
# call. The next call's replays wait for the event, as they may reuse memory the last graph's replays use.
_graph_reuse: dict = {}  # device index -> (Stream, CUDAGraph or None, Event or None, pool id)
_failed_captures: list = []  # kept alive: torch's allocators may still hold a filter that points to them


def _iterate_with_graphed_refits(draw_and_score, refit, scores, result: CEMResult, maximize: bool) -> bool:
    """cem_minimize's iterations 1 .. n_iters - 1 with each refit a replay of one captured refit, which writes into
    result's tensors in place (history at a step counter on the device). Iteration 0 has run: it warmed the ops
    up, as a capture needs, and gave the scores' dtype. False, with a warning, when the capture failed: nothing
    has run then (a capture only records), and the caller iterates without the graph."""
    mean, std, best_x, best_value, history = result
    device = history.device
    static_scores = torch.empty_like(scores, memory_format=torch.contiguous_format)
    step = torch.ones(1, dtype=torch.int64, device=device)

    def captured():
        value, x, new_mean, new_std = refit(static_scores, mean, std)
        new_best_value, new_best_x = _keep_best(best_value, best_x, value, x, maximize)
        best_value.copy_(new_best_value)
        best_x.copy_(new_best_x)
        history.index_copy_(0, step, value.view(1))
        step.add_(1)
        mean.copy_(new_mean)
        std.copy_(new_std)

    with torch.cuda.device(device):
        stream, previous, previous_done, pool = _graph_reuse.get(device.index) or (
            torch.cuda.Stream(), None, None, torch.cuda.graph_pool_handle())
        graph = torch.cuda.CUDAGraph()
        stream.wait_stream(torch.cuda.current_stream())  # the tensors above exist
        # capture_begin/end, not torch.cuda.graph: that one also empties the caching allocator's cache.
        # thread_local: the capture restricts this thread only; in the default mode ("global") a CUDA call that is
        # unsafe during a capture (a cudaMalloc) in any other thread of the process failed. (A synchronize in another
        # thread still invalidates it.)
        with torch.cuda.stream(stream):
            graph.capture_begin(pool, capture_error_mode="thread_local")
            try:
                try:
                    captured()
                finally:
                    graph.capture_end()
            except RuntimeError as error:  # the CUDA error alone named a kernel inside cem_update
                _undo_failed_capture(device.index, graph, pool)
                _graph_reuse[device.index] = (stream, previous, previous_done, torch.cuda.graph_pool_handle())
                warnings.warn(
                    f"cem_minimize(cuda_graph=True) could not capture its refit as a CUDA graph "
                    f"({str(error).splitlines()[0]}), so this call runs without it (the same numbers, more slowly). "
                    f"One cause is a device-wide synchronize in another thread during the capture.",
                    RuntimeWarning, stacklevel=3)
                return False
        if previous_done is not None:
            torch.cuda.current_stream().wait_event(previous_done)
        try:
            for _ in range(history.shape[0] - 1):
                static_scores.copy_(draw_and_score(mean, std))
                graph.replay()
        finally:  # also when fn raises: the replays already queued use the shared pool, so the next call waits on them
            done = torch.cuda.Event()
            done.record()
            _graph_reuse[device.index] = (stream, graph, done, pool)
    return True


def _undo_failed_capture(device_index: int, graph: torch.cuda.CUDAGraph, pool) -> None:
    """What a capture whose capture_end raised leaves behind, undone as far as torch's Python API allows. torch
    (2.11, session 52 call 2) raises before it ends the capture's recording into its memory pool and before it takes
    its CUDA generator out of capture mode, so that every later draw in the process raised "Offset increment outside
    graph capture". The caller moves on to a fresh pool: the pinned-memory allocator's recording into this one has
    no Python API to end it, and would refuse the next capture into it ("already recording to mempool_id")."""
    try:
        torch._C._cuda_endAllocateToPool(device_index, pool)
    except RuntimeError:  # capture_end got that far: it ended the recordings and the generator's capture
        return
    _failed_captures.append(graph)  # the pinned-memory allocator's recording calls a filter that points to it
    torch._C._cuda_releasePool(device_index, pool)  # the failed graph's hold on the pool, which it never releases
    empty = torch.cuda.CUDAGraph()  # its capture_end takes the generator out of capture mode
    with torch.cuda.stream(torch.cuda.Stream()), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "The CUDA Graph is empty"
        empty.capture_begin(capture_error_mode="thread_local")
        empty.capture_end()


def distributed_cem_minimize(fn: Callable[[torch.Tensor], torch.Tensor], mean: torch.Tensor, std: torch.Tensor,
                             n_samples: int, n_elite: int, n_iters: int, *, smoothing: float = 0.0,
                             min_std: float = 0.0, maximize: bool = False, seed: int = 0,
                             group: dist.ProcessGroup | None = None) -> CEMResult:
    """cem_minimize with the population spread over the ranks of a torch.distributed process group.

    Call it on every rank (e.g. under torchrun) with the same arguments. Each rank draws n_samples rows
    from its own generator, seeded seed + rank, and scores them with fn on its own device; the n_elite
    best of all world * n_samples rows are then chosen globally (NaN last, ties to the lower rank-major
    row), so N ranks compute what one process computes with a population of N * n_samples made of the
    same N generators' draws in rank order (tests/test_distributed.py checks exactly that).
    Per iteration the ranks exchange the scores (all_gather) and the elite rows (all_reduce of an
    (n_elite, d) tensor); nothing syncs with the host. Every rank returns the same CEMResult.
    """
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    _check_population(n_samples, n_elite, n_iters, world)
    _check_refit(smoothing, min_std)
    _check_mean(mean)
    mean, std = _detached(mean, std)
    generator = torch.Generator(device=mean.device).manual_seed(seed + rank)
    samples = torch.empty((n_samples, mean.shape[0]), dtype=mean.dtype, device=mean.device)
    history, best_x, best_value = [], None, None
    for _ in range(n_iters):
        normal(mean, std, n_samples, out=samples, generator=generator)
        scores = fn(samples)
        _check_scores(scores, n_samples, samples.device)
        scores = scores.contiguous()
        score_parts = [torch.empty_like(scores) for _ in range(world)]
        dist.all_gather(score_parts, scores, group=group)
        all_scores = torch.cat(score_parts)
        elite = _ranked(all_scores, maximize)[:n_elite]  # global rows, best first
        # Each rank fills the elite rows it holds and zeros elsewhere: the sum over ranks is the elite.
        local = elite - rank * n_samples
        mine = (local >= 0) & (local < n_samples)
        elite_rows = torch.where(mine[:, None], samples[local.clamp(0, n_samples - 1)], 0)
        dist.all_reduce(elite_rows, group=group)
        elite_scores = all_scores[elite]
        best_value, best_x = _keep_best(best_value, best_x, elite_scores[0], elite_rows[0], maximize)
        history.append(elite_scores[0])
        mean, std = cem_update(elite_rows, elite_scores, n_elite, mean, std, smoothing, min_std, maximize)
    return CEMResult(mean, std, best_x, best_value, torch.stack(history))
