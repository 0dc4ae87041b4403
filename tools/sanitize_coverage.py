"""Which CUDA tests have passed under each compute-sanitizer tool, over several runs of tools/sanitize.sh.

One tool over the whole suite takes longer than a device call, so its coverage is built up over
several runs: each run's folder holds sanitize_<tool>_times.log (one line per finished test, see
tests/conftest.py: JK_TEST_TIMES). A run is named as DIR, or DIR:REGEX when kernels changed after it:
its passes of the tests matching REGEX (re.search on the test id) no longer count.

    python tools/sanitize_coverage.py passed TOOL RUN...   the test ids that passed under TOOL, one a line
                                                           (tools/sanitize.sh: SANITIZE_RESUME)
    python tools/sanitize_coverage.py report RUN...        per tool: passed / every test any run saw,
                                                           and the ones still missing
    python tools/sanitize_coverage.py shared LIBRARY.so    the library's kernels that use shared memory
                                                           (racecheck checks nothing else)
Whether a run was clean is its own verdict (tools/sanitize_summary.py, in its sanitize.log): a test
counts here only when it ran to the end and passed.
"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")


def runs(specs):
    """(folder, regex of tests whose passes are stale or None) for each DIR[:REGEX]."""
    for spec in specs:
        folder, _, stale = spec.partition(":")
        yield Path(folder), re.compile(stale) if stale else None


def outcomes(folder, tool):
    """{test id: outcome} of one run and tool (the last line of a test wins)."""
    found = {}
    path = folder / f"sanitize_{tool}_times.log"
    if path.exists():
        for line in path.read_text().splitlines():
            _, outcome, test = line.split()[:3]
            found[test] = outcome
    return found


def passed(tool, specs):
    done = set()
    for folder, stale in runs(specs):
        done |= {test for test, outcome in outcomes(folder, tool).items()
                 if outcome in ("passed", "skipped") and not (stale and stale.search(test))}
    return done


# SASS opcodes that touch shared memory: loads, stores, atomics, matrix loads/stores, async and bulk
# copies into it (a kernel without any and with no static shared memory cannot race there).
SHARED_OPCODES = re.compile(r"^(LDS|STS|ATOMS|LDSM|STSM|LDGSTS|UBLKCP|UTMALDG|UTMASTG)(\.|$)")


def cuobjdump():
    """The CUDA toolkit's cuobjdump, or the one triton bundles; None when there is neither."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import triton
    except ImportError:
        return None
    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    return str(bundled) if bundled.exists() else None


def shared_memory_kernels(library, tool=None):
    """{kernel: why} for each kernel of a CUDA library that uses shared memory: a static size
    (cuobjdump -res-usage) and/or a shared-memory instruction in its SASS (dynamic shared memory), both
    named. (nvcc 13 gives every sm_90 kernel of a module that declares dynamic shared memory 1024 static
    bytes, used or not: linalg's, since session 38.)"""
    tool = tool or cuobjdump()
    run = lambda flag: subprocess.run([tool, flag, str(library)], capture_output=True, text=True, check=True).stdout
    found, kernel = {}, None
    for line in run("-res-usage").splitlines():
        if line.strip().startswith("Function "):
            kernel = line.strip()[len("Function "):].rstrip(":")
        elif kernel and (size := re.search(r"\bSHARED:(\d+)", line)) and int(size.group(1)) > 0:
            found[kernel] = f"{size.group(1)} bytes of static shared memory"
    for line in run("-sass").splitlines():
        if line.strip().startswith("Function : "):
            kernel = line.strip()[len("Function : "):]
        elif kernel and (instruction := re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?(\S+)", line)):
            if SHARED_OPCODES.match(instruction.group(1)) and "instruction" not in found.get(kernel, ""):
                why = f"shared-memory instruction {instruction.group(1)}"
                found[kernel] = f"{found[kernel]}; {why}" if kernel in found else why
    return found


def main(command, *args):
    if command == "shared":
        for kernel, why in sorted(shared_memory_kernels(args[0]).items()):
            print(f"{kernel}: {why}")
        return 0
    if command == "passed":
        tool, *specs = args
        print("\n".join(sorted(passed(tool, specs))))
        return 0
    if command != "report":
        raise SystemExit(__doc__)
    seen = set()
    for folder, _ in runs(args):
        for tool in TOOLS:
            seen |= set(outcomes(folder, tool))
    missing_any = False
    for tool in TOOLS:
        missing = sorted(seen - passed(tool, args))
        missing_any |= bool(missing)
        print(f"{tool}: {len(seen) - len(missing)} of {len(seen)} tests passed")
        for test in missing[:20]:
            print(f"    missing: {test}")
        if len(missing) > 20:
            print(f"    ... and {len(missing) - 20} more")
    return 1 if missing_any else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
