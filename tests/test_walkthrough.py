"""What a new user does first: follow the README and run the examples, as written."""
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _readme_block(after: str, language: str) -> str:
    """The README's first ```language block that follows the line starting with `after`."""
    text = (REPO / "README.md").read_text()
    start = text.index("\n" + after) + 1
    match = re.compile(rf"^```{language}\n(.*?)^```$", re.S | re.M).search(text, start)
    return match.group(1)


def test_readme_adding_a_family_builds_as_written(tmp_path):
    """'Adding a family' copied verbatim into a kernels folder must build, load and run. Its myfam.cpp
    once included cuda_host.h and registered a CUDA kernel outside `#ifdef JK_WITH_CUDA`, used Scale
    without myfam.h and at::empty_symint / AT_DISPATCH without their headers: no build could pass. Its check let
    float16 through to AT_DISPATCH_FLOATING_TYPES, whose error named no argument ("scale" not implemented for 'Half')."""
    family = tmp_path / "kernels" / "myfam"
    family.mkdir(parents=True)
    (family / "myfam.h").write_text(_readme_block("`myfam.h` (see", "cpp"))
    (family / "myfam.cpp").write_text(_readme_block("`myfam.cpp` (see", "cpp"))
    (family / "myfam.cu").write_text(_readme_block("`myfam.cu` holds the kernels", "cpp"))
    (family / "ops.py").write_text(_readme_block("`ops.py` gets the build's namespace", "python"))
    script = """
import torch, loader
f = loader.myfam
device = "cuda" if f.cuda and torch.cuda.is_available() else "cpu"
x = torch.arange(4.0, device=device, requires_grad=True)
y = f.scale(x, 2.5)
torch.testing.assert_close(y, x.detach() * 2.5)
y.sum().backward()
torch.testing.assert_close(x.grad, torch.full_like(x, 2.5))
try:  # its docstring says float32/float64: a float16 x is refused by a check that names x, not by AT_DISPATCH
    f.scale(torch.ones(2, dtype=torch.float16, device=device), 2.0)
    raise SystemExit("float16 passed")
except ValueError as e:
    assert str(e).startswith("x must be float32 or float64"), e
print("ok")
"""
    env = os.environ | {"PYTHONPATH": str(REPO), "JITKERNELS_ROOT": str(family.parent),
                        "JITKERNELS_CACHE": str(tmp_path / "cache")}
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0 and "ok" in result.stdout, result.stdout[-3000:] + result.stderr[-3000:]


def test_every_script_help_gives_its_docstring_first_paragraph_whole():
    """`--help` is a new user's first look at a script: quickstart's description stopped at "on the GPU
    if", shampoo_mlp's at "with this family's Shampoo;", benchmarks/run.py's at "vs torch.compile(reference)"
    (the floor left out): the first line of a sentence."""
    scripts = [*sorted((REPO / "examples").glob("*.py")), *sorted((REPO / "benchmarks").glob("*.py")),
               REPO / "tools" / "profile_ops.py"]
    scripts = [path for path in scripts if "argparse" in path.read_text()]
    env = os.environ | {"PYTHONPATH": str(REPO)}
    runs = [subprocess.Popen([sys.executable, str(path), "--help"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True) for path in scripts]
    for path, run in zip(scripts, runs):
        output = run.communicate(timeout=300)[0]
        assert run.returncode == 0, f"{path.name}: {output[-2000:]}"
        first_paragraph = " ".join(path.read_text().split('"""')[1].split("\n\n")[0].split())
        assert first_paragraph in " ".join(output.split()), f"{path.name} --help:\n{output}"


def test_ebm_sampling_prints_its_speedup_honestly(tmp_path):
    """On the CPU the speedup is near 1: printed with no decimals, 26.3 ms against 18.6 ms read "(1x)". The
    autograd loop runs 20 steps there, scaled to 100, and the line now says so."""
    env = os.environ | {"PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, str(REPO / "examples" / "ebm_sampling.py"), "--device", "cpu",
                             "--chains", "256", "--steps", "10", "--out", str(tmp_path)],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    line = next(line for line in result.stdout.splitlines() if "autograd loop" in line)
    ours, theirs = (float(value) for value in re.findall(r"([\d.]+) ms", line))
    ratio = float(re.search(r"\(([\d.]+)x\)", line).group(1))
    assert abs(ratio - theirs / ours) <= 0.05 + 0.03 * ratio, line  # the printed times are rounded
    assert "(from 20 steps)" in line, line
