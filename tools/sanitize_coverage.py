"""Which CUDA tests have passed under each compute-sanitizer tool, over several runs of tools/sanitize.sh.

One tool over the whole suite takes longer than a device call, so its coverage is built up over
several runs: each run's folder holds sanitize_<tool>_times.log (one line per finished test, see
tests/conftest.py: JK_TEST_TIMES). A run is named as DIR, or DIR:REGEX when kernels changed after it:
its passes of the tests matching REGEX (re.search on the test id) no longer count.

    python tools/sanitize_coverage.py passed TOOL RUN...   the test ids that passed under TOOL, one a line
                                                           (tools/sanitize.sh: SANITIZE_RESUME)
    python tools/sanitize_coverage.py report RUN...        per tool: passed / every test any run saw,
                                                           and the ones still missing
Whether a run was clean is its own verdict (tools/sanitize_summary.py, in its sanitize.log): a test
counts here only when it ran to the end and passed.
"""
import re
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


def main(command, *args):
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
