"""Edit -> reload times with incremental rebuilds (GPU machine): in one process, edit a family's ops.py,
then one .cu file, reload after each, check an op, restore the files."""
import json, sys, time
from pathlib import Path
import torch
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import loader

def steps(family):
    return json.loads((family.library.parent / "manifest.json").read_text())["step_seconds"]

def timed_reload(name, label):
    t = time.perf_counter(); family = loader.reload(name); dt = time.perf_counter() - t
    print(f"{name}: {label}: reload {dt:.2f} s, steps {steps(family)}", flush=True)
    return family

for name, cu in (("fused", "fused.cu"), ("ebm", "ebm_hmc.cu")):
    family = loader.load(name)
    folder = loader.kernels_root() / name
    originals = {p: p.read_text() for p in (folder / "ops.py", folder / cu)}
    try:
        (folder / "ops.py").write_text(originals[folder / "ops.py"] + f"\n# edited {time.time()}\n")
        timed_reload(name, "ops.py edited")
        (folder / cu).write_text(originals[folder / cu] + f"\n// edited {time.time()}\n")
        timed_reload(name, f"{cu} edited")
        if name == "fused":
            x, y = torch.randn(2, 1 << 20, device="cuda")
            assert torch.equal(family.relu_add(x, y, 0.5), torch.relu(x) + y + 0.5)
        else:
            x = torch.randn(1024, 8, device="cuda")
            out = family.hmc_chain(x, "harmonic", 5, 0.1, 3)
            print("ebm hmc_chain ran:", type(out).__name__)
    finally:
        for path, text in originals.items():
            path.write_text(text)
    timed_reload(name, "files restored (cached key)")
