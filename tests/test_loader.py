"""The loader: warm path, reload, concurrent and killed builders, torn caches, build errors, CLI.

Scratch families are built in temporary kernel roots and caches (C++ half only, so
these tests behave the same with or without a GPU)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from conftest import registered_ops

import loader

REPO = Path(loader.__file__).parent
SCRATCH_CPP = textwrap.dedent("""\
    #include "jk.h"

    at::Tensor add_constant(const at::Tensor& x) {
      return x.add(VALUE);
    }

    JK_LIBRARY(m) { m.def("add_constant(Tensor x) -> Tensor"); }
    JK_LIBRARY_IMPL(CPU, m) { m.impl("add_constant", &add_constant); }
    """)


def make_scratch_root(tmp_path: Path, value: float = 1.0, name: str = "scratch") -> Path:
    root = tmp_path / "kernels"
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / name / f"{name}.cpp").write_text(SCRATCH_CPP.replace("VALUE", repr(float(value))))
    return root


def run_python(code: str, root: Path, cache: Path, timeout=600, env_extra=None, **popen) -> subprocess.CompletedProcess:
    env = dict(os.environ, JITKERNELS_ROOT=str(root), JITKERNELS_CACHE=str(cache), JITKERNELS_CUDA="0",
               PYTHONPATH=str(REPO))
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=timeout, **popen)


LOAD_AND_CHECK = """
    import torch, loader
    f = loader.load("scratch")
    print("value", f.add_constant(torch.zeros(1)).item())
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A scratch root and a cache holding its build."""
    tmp = tmp_path_factory.mktemp("built")
    root, cache = make_scratch_root(tmp), tmp / "cache"
    result = run_python(LOAD_AND_CHECK, root, cache)
    assert result.returncode == 0, result.stderr
    assert "value 1.0" in result.stdout
    return root, cache


def test_families_lists_the_repo_families():
    assert "fused" in loader.families()
    assert "common" not in loader.families()


def test_kept_ops_and_families_pickle_by_name(tmp_path):
    """A model that keeps an op (self.act = fused.relu_add) or a family (self.ops = loader.fused): copy.deepcopy
    (an EMA copy) raised "cannot pickle 'module' object" for the family, and torch.load in a process without that
    exact build raised ModuleNotFoundError for the op's private module _jk_ops_jk_fused_<key> (session 53's review).
    Both now come back as the family's current build, loaded by name on first use."""
    import copy
    import pickle

    fused = loader.load("fused")
    kept = {"act": fused.relu_add, "family": fused}
    twin = copy.deepcopy(kept)
    assert twin["act"] is fused.relu_add and twin["family"] is fused
    for protocol in (2, 4, pickle.HIGHEST_PROTOCOL):
        payload = pickle.dumps(kept, protocol=protocol)
        assert b"_jk_ops" not in payload
        assert pickle.loads(payload) == kept
    path = tmp_path / "kept.pt"
    torch.save(kept, path)
    code = textwrap.dedent(f"""
        import torch
        kept = torch.load({str(path)!r}, weights_only=False)  # no loader.load first
        x = torch.tensor([-1.0, 2.0])
        print(kept["act"](x, x, 0.5).tolist(), kept["family"].name)
        """)
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(loader.__file__).parent, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[-2] == "[-0.5, 4.5] fused"


def test_unknown_family_names_it():
    with pytest.raises(ValueError, match="nosuchfamily"):
        loader.load("nosuchfamily")


@pytest.mark.parametrize("cpuinfo, wanted", [
    ("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma f16c bmi2\n", ["-mavx2", "-mfma", "-mf16c"]),
    ("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 f16c\n", []),  # no FMA: no flags at all
    ("processor\t: 0\nFeatures\t: fp asimd\n", []),  # aarch64 has no flags line
    (None, []),  # no /proc/cpuinfo
    # a long flags line, one at the end without a newline, the first CPU's
    ("processor\t: 0\nmodel name\t: " + "x" * 1000 + "\nflags\t\t: " + "sse " * 300 + "avx2 fma f16c\n",
     ["-mavx2", "-mfma", "-mf16c"]),
    ("model name\t: " + "x" * 2100 + "\nflags\t\t: avx2 fma f16c", ["-mavx2", "-mfma", "-mf16c"]),
    ("flags\t\t: sse2\n\nflags\t\t: avx2 fma f16c\n", []),
])
def test_host_vector_flags_follow_the_cpu(tmp_path, cpuinfo, wanted):
    path = tmp_path / "cpuinfo"
    if cpuinfo is not None:
        path.write_text(cpuinfo)
    assert loader._host_vector_flags(str(path)) == wanted


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the flags are read on Linux only")
def test_host_vector_flags_from_numpy_agree_with_cpuinfo(monkeypatch):
    """The warm path asks numpy's CPU features (no file read); /proc/cpuinfo must give the same flags."""
    if loader._numpy_cpu_features() is None:
        pytest.skip("torch did not import numpy here")
    assert loader._host_vector_flags() == loader._host_vector_flags("/proc/cpuinfo")
    # numpy's answer is the one used: a CPU it says lacks F16C gets no flags, and one with all three gets them
    monkeypatch.setattr(loader, "_numpy_cpu_features", lambda: {"AVX2": True, "FMA3": True, "F16C": False})
    assert loader._host_vector_flags() == []
    monkeypatch.setattr(loader, "_numpy_cpu_features", lambda: {"AVX2": True, "FMA3": True, "F16C": True})
    assert loader._host_vector_flags() == ["-mavx2", "-mfma", "-mf16c"]


def test_host_vector_flags_are_in_the_cache_key(monkeypatch):
    """A cache shared with a CPU without AVX2 must not hand it a library built with it."""
    vector = ["-mavx2", "-mfma", "-mf16c"]
    assert loader._host_vector_flags() == [flag for flag in loader.CXX_FLAGS if flag in vector]
    spec = loader._Spec("fused", loader.kernels_root(), cuda=False)
    key = spec._key()
    other_cpu = ([flag for flag in loader.CXX_FLAGS if flag not in vector] if "-mavx2" in loader.CXX_FLAGS
                 else loader.CXX_FLAGS + vector)
    monkeypatch.setattr(loader, "CXX_FLAGS", other_cpu)
    assert spec._key() != key


def test_cuda_toolkit_choice_is_in_the_cache_key(monkeypatch):
    """A build takes its toolkit from $CUDA_HOME or $CUDA_PATH before PATH's nvcc: pointing either at
    another toolkit must give another key (the C++-only key does not depend on them)."""
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    cuda_spec = loader._Spec("fused", loader.kernels_root(), cuda=True)
    cpu_spec = loader._Spec("fused", loader.kernels_root(), cuda=False)
    keys, cpu_key = {cuda_spec._key()}, cpu_spec._key()
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.setenv(variable, "/opt/another-cuda")
        keys.add(cuda_spec._key())
        assert cpu_spec._key() == cpu_key
    assert len(keys) == 3


def test_a_cuda_toolchain_check_leaves_the_keys_alone(monkeypatch):
    """The check before a CUDA build points torch at the toolkit it found; it must not do so through
    $CUDA_HOME, which is in the key: a process's later loads would look for other keys than the same
    loads in a fresh process (a rebuild each time)."""
    import loader_build

    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    if torch.version.cuda is None or loader_build._cuda_home() is None:
        pytest.skip("needs a CUDA build of torch and a CUDA toolkit")
    spec = loader._Spec("fused", loader.kernels_root(), cuda=True)
    key = spec._key()
    try:
        loader_build._check_toolchain(spec)
    except loader.BuildError as exc:  # another CUDA major than torch's, no ninja: nothing to check here
        pytest.skip(str(exc))
    assert "CUDA_HOME" not in os.environ
    assert spec._key() == key


def test_sources_memo_stands_until_a_file_or_folder_changes(tmp_path, monkeypatch):
    """A warm load takes the sources' digest from the cache's memo while every stamp matches; a same-size
    edit, a new file, another root or reload each read the files again."""
    monkeypatch.setenv("JITKERNELS_CACHE", str(tmp_path / "cache"))
    root = make_scratch_root(tmp_path)
    memo_path = tmp_path / "cache" / "scratch" / loader.SOURCES_MEMO

    def key(**kwargs):
        return loader._Spec("scratch", root, cuda=False, **kwargs).key

    def fake_memo():  # the stamps as recorded, with a digest no file has
        memo_path.write_text(json.dumps(json.loads(memo_path.read_text()) | {"digest": "0" * 64}))

    first = key()
    assert not memo_path.exists()  # stamps under 2 s old are not recorded
    real_time_ns = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real_time_ns() + 10 * 10**9)  # 10 s on
    assert key() == first and memo_path.exists()
    fake_memo()
    assert key() != first  # the memo stands: nothing changed
    assert key(reread_sources=True) == first  # reload's way reads the files (and records them again)
    fake_memo()
    source = root / "scratch" / "scratch.cpp"
    source.write_text(source.read_text().replace("1.0", "2.0"))  # same size
    edited = key()
    assert edited == key(reread_sources=True) != first
    fake_memo()
    (root / "scratch" / "notes.h").write_text("// new\n")
    assert key() == key(reread_sources=True) not in (first, edited)
    fake_memo()
    other_root = make_scratch_root(tmp_path / "other", value=2.0)  # same family name, same cache
    assert loader._Spec("scratch", other_root, cuda=False).key == edited


def test_every_cu_file_of_a_family_joins_its_cuda_half(tmp_path):
    """A family may split its CUDA kernels over several .cu files (ninja compiles them at once); the
    CPU-only build compiles none of them, and an edit of any of them changes the key."""
    root = make_scratch_root(tmp_path)
    folder = root / "scratch"
    for name in ("scratch.cu", "scratch_chains.cu", "a_first.cu", "shared.cuh"):
        (folder / name).write_text("// kernels\n")
    with_cuda = loader._Spec("scratch", root, cuda=True)
    assert [p.name for p in with_cuda.sources()] == ["scratch.cpp", "scratch.cu", "a_first.cu", "scratch_chains.cu"]
    assert [p.name for p in loader._Spec("scratch", root, cuda=False).sources()] == ["scratch.cpp"]
    (folder / "scratch_chains.cu").write_text("// kernels, edited\n")
    assert loader._Spec("scratch", root, cuda=True).key != with_cuda.key


def test_every_cpp_file_of_a_family_joins_its_cpp_half(tmp_path):
    """Likewise .cpp files (ebm's chains, session 27): an op defined in a second file of the family is
    compiled, linked and runs."""
    root = tmp_path / "kernels"
    folder = root / "scratch"
    folder.mkdir(parents=True)
    (folder / "scratch.cpp").write_text(textwrap.dedent("""\
        #include "jk.h"
        at::Tensor add_constant(const at::Tensor& x);  // scratch_more.cpp
        JK_LIBRARY(m) { m.def("add_constant(Tensor x) -> Tensor"); }
        JK_LIBRARY_IMPL(CPU, m) { m.impl("add_constant", &add_constant); }
        """))
    (folder / "scratch_more.cpp").write_text('#include <ATen/core/Tensor.h>\n'
                                             'at::Tensor add_constant(const at::Tensor& x) { return x.add(3.0); }\n')
    assert [p.name for p in loader._Spec("scratch", root, cuda=False).sources()] == ["scratch.cpp", "scratch_more.cpp"]
    result = run_python(LOAD_AND_CHECK, root, tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    assert "value 3.0" in result.stdout


def test_warm_load_runs_no_compiler_and_prints_nothing(built):
    root, cache = built
    result = run_python("""
        import subprocess, sys, torch
        def forbidden(*a, **k):
            raise AssertionError("warm load started a subprocess")
        subprocess.Popen = forbidden
        subprocess.run = forbidden
        import loader
        f = loader.load("scratch")
        assert "torch.utils.cpp_extension" not in sys.modules, "warm load imported the build machinery"
        assert "filelock" not in sys.modules, "warm load took the build lock"
        assert "loader_build" not in sys.modules, "warm load imported the build half of the loader"
        print("value", f.add_constant(torch.zeros(1)).item())
    """, root, cache)
    assert result.returncode == 0, result.stderr
    assert "value 1.0" in result.stdout
    assert result.stderr == ""


def test_a_warm_load_of_every_family_prints_nothing():
    """A warm load prints nothing: not even a torch warning from registration (a second
    CompositeExplicitAutograd kernel for ddpm_schedule printed "Overriding a previously registered
    kernel" at every load of diffusion, session 40, call 4)."""
    names = loader.families()
    check = f"""
        import loader
        for name in {names!r}:
            loader.load(name)
        print("loaded")
    """
    same_builds = {"JITKERNELS_CUDA": os.environ.get("JITKERNELS_CUDA", "auto")}  # the suite's (GPU: with CUDA)
    first = run_python(check, loader.kernels_root(), loader.cache_dir(), env_extra=same_builds)  # builds what is missing
    assert first.returncode == 0, first.stderr
    warm = run_python(check, loader.kernels_root(), loader.cache_dir(), env_extra=same_builds)
    assert warm.returncode == 0 and "loaded" in warm.stdout, warm.stderr
    assert warm.stderr == "", warm.stderr


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_build_without_its_cuda_half_names_the_device_it_lacks():
    """fused built with JITKERNELS_CUDA=0 (the C++ half only), called with CUDA tensors: the error says
    the build has no kernel for cuda tensors (jk.h's no_backend_kernel), not that CPU and CUDA have one."""
    check = """
        import torch, loader
        f = loader.load("fused")
        x = torch.ones(4, device="cuda")
        try:
            f.relu_add(x, x)
        except NotImplementedError as error:
            print("error:", error)
    """
    result = run_python(check, loader.kernels_root(), loader.cache_dir())  # JITKERNELS_CUDA=0
    assert result.returncode == 0, result.stderr
    assert "has no kernel for cuda tensors in this build" in result.stdout, result.stdout + result.stderr


def test_warm_load_reads_no_python_source():
    """torch 2.11's torch.library.Library() looks up its caller's line through linecache, which read and
    split all of loader.py in every warm load (0.2-0.3 ms on the GPU host, session 37): fused's
    Autograd kernel must register without it. (torch 2.14 takes sys._getframe, so this can fail only
    with a torch that reads the line.)"""
    check = """
        import linecache, torch
        before = set(linecache.cache)  # import torch reads some of its own
        import loader
        loader.load("fused")
        print("sources read:", sorted(set(linecache.cache) - before))
    """
    first = run_python(check, loader.kernels_root(), loader.cache_dir())  # builds fused if the cache lacks it
    assert first.returncode == 0, first.stderr
    warm = run_python(check, loader.kernels_root(), loader.cache_dir())
    assert warm.returncode == 0, warm.stderr
    assert "sources read: []" in warm.stdout, warm.stdout


def test_edit_then_reload_runs_new_code_in_the_same_process(tmp_path):
    root = make_scratch_root(tmp_path, value=1.0)
    result = run_python(f"""
        import pathlib, torch, loader
        f = loader.load("scratch")
        before = f.add_constant(torch.zeros(1)).item()
        src = pathlib.Path({str(root / 'scratch' / 'scratch.cpp')!r})
        src.write_text(src.read_text().replace("x.add(1.0)", "x.add(2.0)"))
        same = loader.reload("scratch")
        assert same is f
        print("values", before, f.add_constant(torch.zeros(1)).item())
        assert loader.reload("scratch") is f  # nothing changed: no rebuild
    """, root, tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    assert "values 1.0 2.0" in result.stdout
    assert result.stderr.count("done in") == 2  # two builds, not three


def test_a_reloaded_build_keeps_its_own_function_local_statics(tmp_path):
    """A reload loads the new library beside the old one. A static inside a template or inline function
    (a flag set once, such as diffusion's "large clusters allowed on this device") was a unique symbol
    that the new library bound to the old one's copy, so its kernel missed its own setup (session 23:
    conv1d_gn_mish failed with "cluster misconfiguration" after a second diffusion build loaded)."""
    root = tmp_path / "kernels"
    (root / "statics").mkdir(parents=True)
    source = root / "statics" / "statics.cpp"
    source.write_text(textwrap.dedent("""\
        #include "jk.h"

        template <typename T>
        int64_t calls() {  // counts this library's calls
          static int64_t count = 0;
          return ++count;
        }

        at::Tensor count_calls(const at::Tensor& x) { return x.add(calls<float>() + VERSION); }

        JK_LIBRARY(m) { m.def("count_calls(Tensor x) -> Tensor"); }
        JK_LIBRARY_IMPL(CPU, m) { m.impl("count_calls", &count_calls); }
        """).replace("VERSION", "0"))
    result = run_python(f"""
        import pathlib, torch, loader
        f = loader.load("statics")
        first = [f.count_calls(torch.zeros(1)).item() for _ in range(2)]
        src = pathlib.Path({str(source)!r})
        src.write_text(src.read_text().replace("+ 0)", "+ 100)"))
        loader.reload("statics")
        print("calls", *first, f.count_calls(torch.zeros(1)).item())
    """, root, tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    assert "calls 1.0 2.0 101.0" in result.stdout, result.stdout  # 103.0: the old library's count went on


def test_a_rebuild_recompiles_only_what_changed(tmp_path):
    """Each build starts from the last one's objects (of its config and kernels root): a new key whose
    sources did not change (here a new file beside them, as an edit of ops.py) compiles none of them; an
    edited source is recompiled; a source put back with an old modification time (which ninja would not
    see) is recompiled too."""
    root, cache = make_scratch_root(tmp_path), tmp_path / "cache"
    source = root / "scratch" / "scratch.cpp"

    def load_and_steps(expected_value: float, kernels: Path = root) -> dict:
        result = run_python("""
            import json, torch, loader
            f = loader.load("scratch")
            print("value", f.add_constant(torch.zeros(1)).item())
            print("STEPS " + json.dumps(json.loads((f.library.parent / "manifest.json").read_text())["step_seconds"]))
        """, kernels, cache)
        assert result.returncode == 0, result.stderr
        assert f"value {expected_value}" in result.stdout
        return json.loads(result.stdout.split("STEPS ")[1])

    assert "scratch.o" in load_and_steps(1.0)  # the first build compiles everything
    # another checkout of the family, built between two builds of this one, keeps objects of its own
    assert "scratch.o" in load_and_steps(5.0, make_scratch_root(tmp_path / "copy", value=5.0))
    (root / "scratch" / "notes.txt").write_text("a new file: a new key\n")
    steps = load_and_steps(1.0)
    assert "scratch.o" not in steps and "jk_namespace.o" in steps and "jk_scratch.so" in steps
    source.write_text(SCRATCH_CPP.replace("VALUE", "2.0"))
    assert "scratch.o" in load_and_steps(2.0)
    source.write_text(SCRATCH_CPP.replace("VALUE", "3.0"))
    an_hour_ago = time.time() - 3600
    os.utime(source, (an_hour_ago, an_hour_ago))
    assert "scratch.o" in load_and_steps(3.0)


def test_objects_are_kept_for_the_most_recent_few_configs_and_roots(tmp_path, monkeypatch):
    import loader_build

    monkeypatch.setenv("JITKERNELS_CACHE", str(tmp_path / "cache"))
    specs = [loader._Spec("scratch", make_scratch_root(tmp_path / f"checkout{i}"), cuda=False)
             for i in range(loader_build.OBJECTS_KEPT + 2)]
    for spec in specs:
        build_dir = spec.family_cache / f"build-{spec.key[:12]}"
        build_dir.mkdir(parents=True)
        (build_dir / "scratch.o").write_text("an object")
        (build_dir / "jk_scratch.so").write_text("a library")
        loader_build._keep_objects(spec, build_dir, {})
        assert not build_dir.exists() and (loader_build._objects_folder(spec) / "scratch.o").is_file()
        assert not (loader_build._objects_folder(spec) / "jk_scratch.so").exists()  # the next build links anew
    kept = [spec for spec in specs if loader_build._objects_folder(spec).is_dir()]
    assert kept == specs[-loader_build.OBJECTS_KEPT:]


def test_superseded_builds_are_deleted_but_the_most_recent_few(tmp_path, monkeypatch):
    """Each edit -> reload publishes a build; only the newest BUILDS_KEPT of one config and kernels root
    stay. Another root's build (here a copy of the family) and a build without a recorded origin (an
    older cache) are left alone."""
    import loader_build

    root, cache = make_scratch_root(tmp_path), tmp_path / "cache"
    ops_py = root / "scratch" / "ops.py"
    result = run_python(f"""
        import pathlib, torch, loader, loader_build
        loader_build.BUILDS_KEPT = 2
        print("COPY", loader.load("scratch", {str(make_scratch_root(tmp_path / 'copy', value=5.0))!r}).key)
        f = loader.load("scratch")
        keys = [f.key]
        for edit in range(3):  # an ops.py edit: a new key, linked only
            pathlib.Path({str(ops_py)!r}).write_text(f"# edit {{edit}}\\n")
            keys.append(loader.reload("scratch").key)
            assert f.add_constant(torch.zeros(1)).item() == 1.0
        print("KEYS", *keys)
    """, root, cache)
    assert result.returncode == 0, result.stderr
    keys = result.stdout.split("KEYS ")[1].split()
    copy_key = result.stdout.split("COPY ")[1].split()[0]
    assert len(set(keys)) == 4
    published = {p.name for p in (cache / "scratch").iterdir() if (p / loader.MANIFEST).is_file()}
    assert published == {copy_key, *keys[-2:]}

    # the unit: an old manifest without an origin stays; of one origin, the newest stay
    monkeypatch.setenv("JITKERNELS_CACHE", str(tmp_path / "unit"))
    monkeypatch.setattr(loader_build, "BUILDS_KEPT", 2)
    spec = loader._Spec("scratch", root, cuda=False)
    spec.family_cache.mkdir(parents=True, exist_ok=True)
    for i, origin in enumerate([None, loader_build._origin(spec), loader_build._origin(spec)]):
        folder = spec.family_cache / f"{i:064x}"
        folder.mkdir()
        (folder / loader.MANIFEST).write_text(json.dumps({"published_ns": i, **({"origin": origin} if origin else {})}))
    loader_build._prune_superseded_builds(spec)  # spec.key itself counts as one of the two kept
    remaining = {p.name for p in spec.family_cache.iterdir() if (p / loader.MANIFEST).is_file()}
    assert f"{0:064x}" in remaining and f"{2:064x}" in remaining and f"{1:064x}" not in remaining


def test_prebuild_builds_missing_families_side_by_side_in_child_processes(tmp_path, monkeypatch, capsys):
    """With cores to spare, prebuild compiles the uncached families in child processes at once, the
    biggest sources first; a broken one is reported, not raised (its load raises), and cached ones are
    not rebuilt. Below 6 CPUs it leaves every build to load."""
    monkeypatch.setenv("JITKERNELS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("JITKERNELS_CUDA", "0")
    root = make_scratch_root(tmp_path, value=1.0, name="first")
    make_scratch_root(tmp_path, value=2.0, name="second")
    with open(root / "second" / "second.cpp", "a") as source:  # second: the most bytes to compile
        source.write("// padding\n" * 100)
    make_scratch_root(tmp_path, name="broken")
    (root / "broken" / "broken.cpp").write_text("this is not C++\n")

    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    loader.prebuild(root=root)
    assert not any(loader._Spec(name, root).cached_build_complete() for name in ("first", "second"))

    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    loader.prebuild(root=root)
    log = capsys.readouterr().err
    assert "building second, first, broken: up to 2 at once" in log  # started in that order
    assert "first built" in log and "second built" in log and "broken failed" in log
    specs = [loader._Spec(name, root) for name in ("first", "second")]
    assert all(spec.cached_build_complete() for spec in specs)
    assert not {spec.namespace for spec in specs} & loader._loaded_namespaces  # built elsewhere
    loader.prebuild(["first", "second"], root=root)  # both cached: nothing to do
    loader.prebuild("first", root=root)  # one name: was list("first"), five letters that are no family
    assert capsys.readouterr().err == ""
    with pytest.raises(ValueError, match="no kernel family 'frist'"):  # a typo was skipped in silence
        loader.prebuild(["second", "frist"], root=root)
    with pytest.raises(loader.BuildError, match="broken.cpp:1"):
        loader.load("broken", root)


def test_concurrent_processes_build_once(tmp_path):
    root, cache = make_scratch_root(tmp_path), tmp_path / "cache"
    env = dict(os.environ, JITKERNELS_ROOT=str(root), JITKERNELS_CACHE=str(cache), JITKERNELS_CUDA="0",
               PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(LOAD_AND_CHECK)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outputs]
    assert all("value 1.0" in out for out, _ in outputs)
    assert sum(err.count("done in") for _, err in outputs) == 1


def test_killed_builder_does_not_block_the_next_load(tmp_path):
    root, cache = make_scratch_root(tmp_path), tmp_path / "cache"
    env = dict(os.environ, JITKERNELS_ROOT=str(root), JITKERNELS_CACHE=str(cache), JITKERNELS_CUDA="0",
               PYTHONPATH=str(REPO))
    builder = subprocess.Popen([sys.executable, "-c", "import loader; loader.load('scratch')"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while not list((cache / "scratch").glob("build-*/build.ninja")) and time.time() < deadline:
        time.sleep(0.1)
    assert builder.poll() is None, "the builder finished before it could be killed"
    os.killpg(builder.pid, signal.SIGKILL)  # the builder and its compilers, mid-build
    builder.wait()
    result = run_python(LOAD_AND_CHECK, root, cache, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "value 1.0" in result.stdout


def test_truncated_library_is_rebuilt(built, tmp_path):

    root, cache = built
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    library = next(copy.glob("scratch/*/*.so"))
    library.write_bytes(library.read_bytes()[:1000])
    result = run_python(LOAD_AND_CHECK, root, copy)
    assert result.returncode == 0, result.stderr
    assert "value 1.0" in result.stdout
    assert "done in" in result.stderr  # it was rebuilt
    assert library.stat().st_size > 1000


def test_a_copied_cache_is_hashed_once_then_trusted(built, tmp_path, monkeypatch):
    # A cache restored by tar or copied without its mtimes: the library's stat no longer matches the
    # manifest, so the warm path checks its sha256, then records the new stat for the next load.
    root, cache = built
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    library = next(copy.glob("scratch/*/*.so"))
    os.utime(library, ns=(1_000_000_000, 1_000_000_000))
    monkeypatch.setenv("JITKERNELS_CACHE", str(copy))
    monkeypatch.setenv("JITKERNELS_CUDA", "0")
    spec = loader._Spec("scratch", root)
    assert spec.library == library
    manifest = json.loads((library.parent / "manifest.json").read_text())
    assert manifest["library_stat"] != loader._stat_identity(library)
    assert spec.cached_build_complete()  # hashed: intact
    assert json.loads((library.parent / "manifest.json").read_text())["library_stat"] == loader._stat_identity(library)
    assert not list(library.parent.glob("*.tmp"))

    def no_hashing(path):
        raise AssertionError(f"hashed {path} again")

    monkeypatch.setattr(loader, "_sha256", no_hashing)
    assert spec.cached_build_complete()  # the recorded stat matches: no hash
    library.write_bytes(b"\0" * library.stat().st_size)  # damaged in place: the stat changes, the hash is checked
    monkeypatch.undo()
    monkeypatch.setenv("JITKERNELS_CACHE", str(copy))
    assert not spec.cached_build_complete()


def test_broken_family_raises_build_error_with_file_and_line(tmp_path):
    root = make_scratch_root(tmp_path)
    (root / "broken").mkdir()
    (root / "broken" / "broken.cpp").write_text('#include "jk.h"\n\nint broken() { return undefined_name; }\n')
    result = run_python("""
        import torch, loader
        try:
            loader.load("broken")
        except loader.BuildError as exc:
            print("ERROR", str(exc).splitlines()[0])
            print("LOG", str(exc).split("full log: ")[1])
        else:
            raise SystemExit("no BuildError")
        import loader_build
        compile_for_real = loader_build.build_and_load
        def compile_and_fail(spec):
            print("COMPILED")
            raise loader.BuildError("still broken", in_sources=True)
        loader_build.build_and_load = compile_and_fail
        for again in (lambda: loader.load("broken"), lambda: loader.broken):  # unchanged: the same error, at once
            try:
                again()
            except loader.BuildError as exc:
                print("AGAIN", str(exc).splitlines()[0], "|", str(exc).splitlines()[-1])
        try:
            loader.reload("broken")  # reload compiles it again as it is
        except loader.BuildError as exc:
            print("FAKE", exc)
        loader_build.build_and_load = compile_for_real
        try:
            loader.reload("broken")
        except loader.BuildError as exc:
            print("RELOADED", str(exc).splitlines()[0])
        f = loader.load("scratch")  # one broken family does not stop the others
        print("value", f.add_constant(torch.zeros(1)).item())
    """, root, tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    error = next(line for line in result.stdout.splitlines() if line.startswith("ERROR"))
    assert "broken.cpp:3:" in error and "undefined_name" in error
    again = [line for line in result.stdout.splitlines() if line.startswith("AGAIN")]
    assert len(again) == 2 and all(error[len("ERROR"):] in line and "not compiled again" in line for line in again)
    assert result.stdout.count("COMPILED") == 1 and "FAKE still broken" in result.stdout, result.stdout
    assert f"RELOADED{error[len('ERROR'):]}" in result.stdout
    log = next(line for line in result.stdout.splitlines() if line.startswith("LOG")).split(" ", 1)[1]
    assert Path(log).is_file()
    assert "value 1.0" in result.stdout


def test_failed_build_logs_are_kept_for_the_newest_few(tmp_path):
    """Every failed edit -> reload wrote build-<key>.log into the family's cache, and none was ever deleted."""
    import types

    import loader_build

    for i in range(loader_build.FAILED_LOGS_KEPT + 3):
        spec = types.SimpleNamespace(family_cache=tmp_path, key=f"{i:012d}", name="scratch", halves=lambda: "C++")
        error = loader_build._compile_error(spec, f"scratch.cpp:1:1: error: number {i}\n", tmp_path / "build")
        assert f"full log: {tmp_path / f'build-{i:012d}.log'}" in str(error)
        os.utime(tmp_path / f"build-{i:012d}.log", (1000 + i, 1000 + i))  # distinct ages, oldest first
    kept = sorted(path.name for path in tmp_path.glob("build-*.log"))
    newest = range(3, loader_build.FAILED_LOGS_KEPT + 3)
    assert kept == [f"build-{i:012d}.log" for i in newest]


def test_a_relative_cache_or_root_stays_where_it_was_at_import(tmp_path):
    """A relative JITKERNELS_CACHE followed os.chdir: a notebook that changed folder built every family
    again into a new cache there (and a relative JITKERNELS_ROOT lost its families)."""
    make_scratch_root(tmp_path)
    result = run_python("""
        import os, loader
        before = loader.cache_dir(), loader.kernels_root(), loader.families()
        os.chdir(os.path.expanduser("~"))
        after = loader.cache_dir(), loader.kernels_root(), loader.families()
        print("SAME", before == after, before)
    """, "kernels", "cache", env_extra={}, cwd=tmp_path)
    assert f"SAME True ({Path(tmp_path / 'cache')!r}, {Path(tmp_path / 'kernels')!r}, ['scratch'])" in result.stdout, \
        result.stdout + result.stderr


def test_a_registration_that_throws_is_a_build_error_not_a_dead_process(tmp_path):
    """A schema typo or an op defined twice throws while the library's static initializers run, inside
    dlopen: the exception ended in std::terminate and the process (a notebook's kernel) died with SIGABRT
    at load or reload. It is a BuildError naming the registration's file and line, and fixing the
    source and reloading works in the same process."""
    root = make_scratch_root(tmp_path)
    source = root / "scratch" / "scratch.cpp"
    source.write_text(SCRATCH_CPP.replace("VALUE", "1.0").replace("(Tensor x)", "(Tensr x)"))
    result = run_python(f"""
        import pathlib, torch, loader
        source = pathlib.Path({str(source)!r})
        try:
            loader.load("scratch")
        except loader.BuildError as exc:
            print("TYPO", str(exc).splitlines()[0], "|", "Tensr" in str(exc))
        source.write_text(source.read_text().replace('m.def("add_constant(Tensr x) -> Tensor");',
                                                     'm.def("add_constant(Tensor x) -> Tensor"); m.def("add_constant(Tensor x) -> Tensor");'))
        try:
            loader.reload("scratch")
        except loader.BuildError as exc:
            print("TWICE", str(exc).splitlines()[0])
        source.write_text(source.read_text().replace(' m.def("add_constant(Tensor x) -> Tensor");', '', 1))
        print("value", loader.reload("scratch").add_constant(torch.zeros(1)).item())
    """, root, tmp_path / "cache")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"TYPO {source}:7: " in result.stdout and "unknown type specifier" in result.stdout, result.stdout
    assert "| True" in result.stdout
    assert f"TWICE {source}:7: Tried to register an operator" in result.stdout, result.stdout
    assert "value 1.0" in result.stdout


def first_build_error_line(root, cache, env_extra=None) -> str:
    """The first line of the BuildError that loading the scratch family raises, in a fresh process."""
    result = run_python("""
        import loader
        try:
            loader.load("scratch")
        except loader.BuildError as exc:
            print("ERROR", str(exc).splitlines()[0])
    """, root, cache, env_extra=env_extra)
    assert result.returncode == 0, result.stderr[-3000:]
    return next(line for line in result.stdout.splitlines() if line.startswith("ERROR"))


def test_a_function_declared_but_defined_nowhere_is_named(tmp_path):
    """A library links with undefined symbols, and then fails to load: torch's error says only "Could not
    load this library", with dlopen's reason in its cause, and the BuildError said "no compiler error line
    found". It names the symbol, demangled where c++filt is there."""
    root = make_scratch_root(tmp_path)
    (root / "scratch" / "scratch.cpp").write_text(SCRATCH_CPP.replace(
        "at::Tensor add_constant(const at::Tensor& x) {\n  return x.add(VALUE);",
        "at::Tensor helper(const at::Tensor& x);\nat::Tensor add_constant(const at::Tensor& x) {\n  return helper(x);"))
    error = first_build_error_line(root, tmp_path / "cache")
    assert "undefined symbol: _Z6helperRKN2at6TensorE" in error, error
    assert shutil.which("c++filt") is None or "helper(at::Tensor const&)" in error, error


@pytest.mark.parametrize("log, first", [
    ("Error building extension 'jk_ebm': [1/9] c++ -c ebm.cpp\nFAILED: ebm.o\nc++ -c ebm.cpp\n"
     "c++: fatal error: Killed signal terminated program cc1plus\ncompilation terminated.\n",
     "c++: fatal error: Killed signal terminated program cc1plus"),
    ("Error building extension 'jk_fused': [1/3] nvcc -c fused.cu\nFAILED: fused.cuda.o\n"
     "nvcc fatal   : Unsupported gpu architecture 'compute_100'\n",
     "nvcc fatal   : Unsupported gpu architecture 'compute_100'"),
    ("Unknown CUDA arch (sm_90) or GPU not supported", "Unknown CUDA arch (sm_90) or GPU not supported"),
    ("Error building extension 'jk_fused': [1/3] c++ -c fused.cpp\nninja: build stopped\n",
     "build failed (no compiler error line found)"),
])
def test_a_build_error_without_a_source_line_still_says_why(log, first):
    """A compiler killed for memory, nvcc refusing an arch and a mistyped TORCH_CUDA_ARCH_LIST (torch raises
    before any compiler runs) all gave "build failed (no compiler error line found)", the reason only in
    the log."""
    import loader_build

    assert loader_build._first_compiler_error(log) == first


def test_a_verbose_build_error_still_names_the_compiler_error(tmp_path):
    """With JITKERNELS_VERBOSE=1 torch sends the compiler's output to file descriptor 1 (a notebook's server
    log, not the cell) and leaves it out of its error: the BuildError said "build failed (no compiler error
    line found)" and its log held two lines, neither the error."""
    root = make_scratch_root(tmp_path)
    (root / "scratch" / "scratch.cpp").write_text('#include "jk.h"\n\nint broken() { return undefined_name; }\n')
    error = first_build_error_line(root, tmp_path / "cache", env_extra={"JITKERNELS_VERBOSE": "1"})
    assert "scratch.cpp:3:" in error and "undefined_name" in error, error


def test_missing_ninja_says_how_to_fix_it(tmp_path):
    root = make_scratch_root(tmp_path)
    result = run_python("""
        import torch.utils.cpp_extension as ce
        ce.is_ninja_available = lambda: False
        import loader
        try:
            loader.load("scratch")
        except loader.BuildError as exc:
            print("ERROR", exc)
    """, root, tmp_path / "cache")
    assert "ERROR ninja is not installed: run `pip install ninja`" in result.stdout, result.stderr


def test_cli_list_and_info(built):
    root, cache = built
    env = dict(os.environ, JITKERNELS_ROOT=str(root), JITKERNELS_CACHE=str(cache), JITKERNELS_CUDA="0")
    listing = subprocess.run([sys.executable, str(REPO / "loader.py"), "list"], env=env, capture_output=True,
                             text=True, timeout=120)
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.startswith("scratch") and "cached" in listing.stdout
    info = subprocess.run([sys.executable, str(REPO / "loader.py"), "info"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert info.returncode == 0 and "torch" in info.stdout and str(cache) in info.stdout


def test_a_kernels_root_that_is_not_a_folder_is_named(tmp_path):
    """A mistyped JITKERNELS_ROOT: `list` and `build` printed nothing and exited 0, and load said "(families: none)"."""
    missing = tmp_path / "no_such_kernels"
    env = dict(os.environ, JITKERNELS_ROOT=str(missing), JITKERNELS_CACHE=str(tmp_path / "cache"))
    listing = subprocess.run([sys.executable, str(REPO / "loader.py"), "list"], env=env, capture_output=True,
                             text=True, timeout=120)
    assert listing.returncode == 1 and f"no kernel families under {missing}" in listing.stderr, listing
    for build in (["build"], ["build", "--all"]):  # built nothing, said nothing and exited 0
        building = subprocess.run([sys.executable, str(REPO / "loader.py"), *build], env=env, capture_output=True,
                                  text=True, timeout=120)
        assert building.returncode == 1 and f"no kernel families under {missing}" in building.stderr, building
    with pytest.raises(ValueError, match="the kernels root .*no_such_kernels is not a folder"):
        loader.load("fused", missing)


def test_register_autograd_fills_dropped_defaults_and_slices_needs_input_grad():
    # The dispatcher hands the Autograd kernel only the arguments that differ from their defaults;
    # setup_context must still see every input, and backward needs_input_grad for the op's inputs.
    lib = torch.library.Library("jk_test_autograd", "DEF")
    lib.define("scale(Tensor x, Tensor y, float s=2.0, float? shift=None) -> Tensor")
    lib.impl("scale", lambda x, y, s=2.0, shift=None: x * s + y + (shift or 0.0), "CPU")
    seen = {}

    def setup(ctx, inputs, output):
        seen["inputs"] = inputs
        ctx.s = inputs[2]

    def backward(ctx, grad):
        seen["needs_input_grad"] = ctx.needs_input_grad
        return grad * ctx.s, None, None, None

    loader.register_autograd("jk_test_autograd::scale", backward, setup_context=setup)
    x = torch.randn(4, requires_grad=True)
    y = torch.randn(4)
    torch.ops.jk_test_autograd.scale(x, y).sum().backward()
    assert len(seen["inputs"]) == 4 and seen["inputs"][2:] == (2.0, None)
    assert seen["needs_input_grad"] == (True, False, False, False)
    torch.testing.assert_close(x.grad, torch.full_like(x, 2.0))
    with torch.no_grad():  # no grad wanted: the op runs below autograd without the Function
        assert torch.ops.jk_test_autograd.scale(x, y, 3.0).grad_fn is None


def test_differentiable_ops_take_no_python_kernel_when_no_gradient_is_needed():
    """Every op whose derivative ops.py registers keeps a C++ Autograd kernel (jk::def_differentiable's
    router; a Python kernel there cost ~4 µs of a 6 µs call), and the Python one sits on its twin."""
    def autograd_registration(op: str) -> str:
        return next((line for line in torch._C._dispatch_dump(op).splitlines() if line.startswith("Autograd")), "")

    python_kernels = []
    for name in loader.families():
        python_kernels += [op for op in registered_ops(name) if "loader.py" in autograd_registration(op)]
    assert len(python_kernels) >= 8, python_kernels  # relu_add, the energies, langevin_step, conv, linalg
    for op in python_kernels:
        assert op.endswith("_autograd"), f"{op} runs a Python kernel on every call: define it with jk::def_differentiable"
        public = op[: -len("_autograd")]
        assert ".cpp" in autograd_registration(public) and "loader.py" not in autograd_registration(public)


def test_registering_for_an_op_that_does_not_exist_names_it():
    """An op renamed in C++ but not in ops.py: register_autograd raised torch's "Found no matching schema",
    which names nothing, and register_vmap / register_batch_dim_vmap / register_drawing_vmap registered
    their rule on no op, in silence (vmap then took torch's per-sample fallback, with every randomness
    mode drawing "different")."""
    library = torch.library.Library("jk_test_missing_op", "DEF")
    library.define("add_one(Tensor x) -> Tensor")
    calls = {"register_autograd": lambda q: loader.register_autograd(q, lambda ctx, g: g, setup_context=None),
             "register_vmap": lambda q: loader.register_vmap(q, lambda info, in_dims, x: (x, 0)),
             "register_batch_dim_vmap": loader.register_batch_dim_vmap,
             "register_drawing_vmap": loader.register_drawing_vmap}
    for caller, register in calls.items():
        with pytest.raises(RuntimeError, match=f"{caller}: there is no op jk_test_missing_op::add_on; "
                                               "the family's C.. defines add_one$"):
            register("jk_test_missing_op::add_on")


def test_register_autograd_refuses_keyword_only_arguments():
    lib = torch.library.Library("jk_test_autograd_kwonly", "DEF")
    lib.define("scale(Tensor x, *, float s=2.0) -> Tensor")
    with pytest.raises(NotImplementedError, match="keyword-only"):
        loader.register_autograd("jk_test_autograd_kwonly::scale", lambda ctx, g: g, setup_context=lambda **_: None)


STATIC_RUNTIME_CPP = textwrap.dedent("""\
    #include <sstream>
    #include "jk.h"

    // Numbers streamed both ways: into a check's message (c10::str) and into our own stream. With
    // the static libstdc++ exported, numbers went through half of each copy: dropped silently here
    // (the dev machine), SIGSEGV on the GPU image.
    at::Tensor describe_rank(const at::Tensor& x) {
      TORCH_CHECK(x.dim() < 4, "x has ", x.dim(), " dims, at most ", 1.5 * 2, " allowed");
      std::ostringstream text;
      text << "rank " << x.dim() << " scale " << 0.5 * x.dim();
      return x.new_full({1}, static_cast<double>(text.str().size()));
    }

    JK_LIBRARY(m) { m.def("describe_rank(Tensor x) -> Tensor"); }
    JK_LIBRARY_IMPL(CPU, m) { m.impl("describe_rank", &describe_rank); }
    """)


def test_a_statically_linked_libstdcxx_stays_private(tmp_path):
    """The GPU image's compiler links libstdc++ into every library. Its symbols must not be exported
    (each is a lookup at dlopen, and exported they mix with the process's own libstdc++, which broke
    streaming numbers), and a check failing inside must still reach Python as a RuntimeError."""
    nm, readelf, compiler = shutil.which("nm"), shutil.which("readelf"), shutil.which(os.environ.get("CXX", "c++"))
    if nm is None or readelf is None or compiler is None:
        pytest.skip("needs nm, readelf and a C++ compiler")
    probe = subprocess.run([compiler, "-print-file-name=libstdc++.a"], capture_output=True, text=True)
    if not os.path.isabs(probe.stdout.strip()):
        pytest.skip("this compiler has no static libstdc++")
    wrapper = tmp_path / "cxx-static-libstdcxx"
    wrapper.write_text(f'#!/bin/sh\nexec {compiler} "$@" -static-libstdc++\n')
    wrapper.chmod(0o755)
    root = tmp_path / "kernels"
    (root / "scratch").mkdir(parents=True)
    (root / "scratch" / "scratch.cpp").write_text(STATIC_RUNTIME_CPP)
    result = run_python("""
        import torch, loader
        f = loader.load("scratch")
        print("library", f.library)
        print("value", f.describe_rank(torch.zeros(2, 2)).item())
        try:
            f.describe_rank(torch.zeros(1, 1, 1, 1))
        except RuntimeError as error:
            print("error", str(error).splitlines()[0])
    """, root, tmp_path / "cache", env_extra={"CXX": str(wrapper)})
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert lines["value"] == str(float(len("rank 2 scale 1"))), "numbers streamed inside the library went missing"
    assert lines["error"] == "x has 4 dims, at most 3 allowed"
    needed = subprocess.run([readelf, "-d", lines["library"]], capture_output=True, text=True).stdout
    assert "libstdc++" not in needed, "the wrapper did not link libstdc++ statically: the test proves nothing"
    exported = subprocess.run([nm, "-D", "-C", "--defined-only", lines["library"]], capture_output=True,
                              text=True, check=True).stdout
    runtime_only = ("std::locale", "std::ios_base", "std::num_put", "std::moneypunct", "std::codecvt")
    leaked = [line for line in exported.splitlines() if any(name in line for name in runtime_only)]
    assert not leaked, f"{len(leaked)} symbols of the static libstdc++ exported, e.g. {leaked[:3]}"


# What a family's .cu files may include from torch: plain structs and the 16-bit float types. The rest
# (tensor, dispatch, c10 CUDA headers) cost nvcc ~6 s per file before its own code (cuda_launch.cuh).
LIGHT_TORCH_HEADERS = {"ATen/cuda/PhiloxCudaState.h", "c10/util/Half.h", "c10/util/BFloat16.h",
                       "c10/macros/Macros.h"}


def _includes_of(source: Path, kernels: Path) -> dict[str, Path]:
    """Every #include reached from `source` through our own headers: included name -> the file naming it."""
    found, seen, pending = {}, set(), [source]
    while pending:
        path = pending.pop()
        seen.add(path)
        for line in path.read_text().splitlines():
            if not line.startswith("#include"):
                continue
            name = line.split()[1].strip('<>"')
            found.setdefault(name, path)
            for folder in (path.parent, kernels / "common"):
                if line.split()[1].startswith('"') and (folder / name).is_file() and folder / name not in seen:
                    pending.append(folder / name)
    return found


@pytest.mark.parametrize("source", sorted((REPO / "kernels").glob("*/*.cu")), ids=lambda p: p.name)
def test_cu_files_include_no_tensor_headers(source):
    """A heavy include slips in silently (one header's include of another), so every .cu file's are checked."""
    includes = _includes_of(source, REPO / "kernels")
    heavy = {name: path.name for name, path in includes.items()
             if name.startswith(("ATen/", "torch/", "c10/")) and name not in LIGHT_TORCH_HEADERS}
    assert not heavy, f"{source.name} reaches heavy torch headers (header: included by): {heavy}"
    assert "cuda_launch.cuh" in includes  # the walk follows our headers


def test_the_include_check_sees_a_heavy_header(tmp_path):
    """The walk above follows a family header into kernels/common and finds a heavy include there."""
    (tmp_path / "common").mkdir()
    (tmp_path / "fam").mkdir()
    (tmp_path / "common" / "light.cuh").write_text('#include <c10/util/Half.h>\n#include "deep.h"\n')
    (tmp_path / "common" / "deep.h").write_text("#include <ATen/core/TensorBase.h>\n")
    (tmp_path / "fam" / "fam.cu").write_text('#include "light.cuh"\n')
    includes = _includes_of(tmp_path / "fam" / "fam.cu", tmp_path)
    assert includes["ATen/core/TensorBase.h"].name == "deep.h"


def test_load_for_names_the_builds_a_saved_program_calls(tmp_path):
    """A saved program (torch.export.save, an AOTInductor package) names each op by its build, jk_<family>_<key>,
    so it runs only where that build is loaded; torch's error for another build (an edited kernel, a CPU-only
    build of a GPU export) said "Could not find schema" and nothing more (session 53's deployment review).
    loader.load_for loads what the file calls, or says which build it needs and which this process has."""
    import zipfile

    fused = loader.load("fused")

    class Model(torch.nn.Module):
        def forward(self, x, y):
            return fused.relu_add(x, y, 0.5)

    x = torch.randn(3, 4)
    path = tmp_path / "relu_add.pt2"
    torch.export.save(torch.export.export(Model(), (x, x)), path)
    assert loader.load_for(path) == {"fused": [fused.namespace]}
    program = torch.export.load(path)
    torch.testing.assert_close(program.module()(x, x), torch.relu(x) + x + 0.5)
    stale = tmp_path / "stale.pt2"
    with zipfile.ZipFile(stale, "w") as archive:  # a file made by a build this cache never held
        archive.writestr("program.json", '{"target": "torch.ops.jk_fused_0123456789ab.relu_add.default"}')
    with pytest.raises(ValueError, match=rf"jk_fused_0123456789ab, and this process builds {fused.namespace}"):
        loader.load_for(stale)


def test_load_for_loads_an_older_build_the_cache_still_holds(tmp_path):
    """After an edit of the family, a program saved from its previous build runs on that build's kernels, loaded
    from the cache by load_for (torch.export.load alone raised "Could not find schema")."""
    root = make_scratch_root(tmp_path)
    cpp = root / "scratch" / "scratch.cpp"
    cpp.write_text(cpp.read_text() + 'JK_LIBRARY_IMPL(Meta, m) { m.impl("add_constant", &add_constant); }\n')
    save = f"""
        import torch, loader
        f = loader.load("scratch")
        class Model(torch.nn.Module):
            def forward(self, x):
                return f.add_constant(x)
        torch.export.save(torch.export.export(Model(), (torch.zeros(2),)), {str(tmp_path / "old.pt2")!r})
        print(f.namespace)
        """
    saved = run_python(save, root, tmp_path / "cache")
    assert saved.returncode == 0, saved.stderr
    cpp.write_text(cpp.read_text().replace("x.add(1.0)", "x.add(2.0)"))
    run = f"""
        import torch, loader
        print(loader.load("scratch").namespace)
        print(loader.load_for({str(tmp_path / "old.pt2")!r}))
        print(torch.export.load({str(tmp_path / "old.pt2")!r}).module()(torch.zeros(2)).tolist())
        """
    ran = run_python(run, root, tmp_path / "cache")
    assert ran.returncode == 0, ran.stderr
    old_namespace = saved.stdout.split()[-1]
    current, wanted, value = ran.stdout.strip().splitlines()[-3:]
    assert current != old_namespace and wanted == str({"scratch": [old_namespace]}) and value == "[1.0, 1.0]"


def test_load_for_takes_no_cached_build_of_another_torch(tmp_path):
    """An older cached build is loaded only when it was built for this torch (and whole): a cache shared across a
    torch upgrade held builds whose libraries this torch cannot load (session 53's review of load_for)."""
    import json
    import shutil
    import zipfile

    fused = loader.load("fused")
    other = "jk_fused_0123456789ab"  # a build made by another torch, as its manifest says
    folder = loader.cache_dir() / "fused" / ("0123456789ab" + "0" * 52)
    folder.mkdir()
    try:
        shutil.copy(fused.library, folder / f"{other}.so")
        manifest = json.loads((fused.library.parent / loader.MANIFEST).read_text())
        library_sha256 = loader._sha256(folder / f"{other}.so")
        (folder / loader.MANIFEST).write_text(json.dumps(manifest | {"namespace": other, "torch": "1.0.0",
                                                                     "library_sha256": library_sha256}))
        stale = tmp_path / "stale.pt2"
        with zipfile.ZipFile(stale, "w") as archive:
            archive.writestr("program.json", f'{{"target": "torch.ops.{other}.relu_add.default"}}')
        with pytest.raises(ValueError, match=r"holds no build jk_fused_0123456789ab for this torch"):
            loader.load_for(stale)
    finally:
        shutil.rmtree(folder)
