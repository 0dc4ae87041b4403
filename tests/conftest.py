"""Shared test fixtures: the devices to run on, and seeded randomness."""
import os
import pytest
import torch

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
# CUDA graphs need PyTorch's caching allocator, which tools/sanitize.sh turns off (so memcheck
# sees each tensor's true bounds): tests capture graphs only where they work.
GRAPHS_WORK = os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") != "1"
needs_graphs = pytest.mark.skipif(not GRAPHS_WORK, reason="CUDA graphs need the caching allocator")

# Tolerances for comparing against reference.py (atol, rtol) by dtype.
TOLERANCES = {
    torch.float64: (1e-10, 1e-10),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
}


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def pytest_terminal_summary(terminalreporter):
    """test_bad_input.py counts the cases it tried: say how many."""
    import sys
    module = sys.modules.get("test_bad_input")
    if module is not None and module.CASES_RUN:
        ops = len({op for op, _ in module.CASES_RUN})
        terminalreporter.write_line(f"bad-input sweep: {len(module.CASES_RUN)} cases over {ops} ops, "
                                    "the process survived all of them")
