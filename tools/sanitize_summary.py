"""One tool's compute-sanitizer logs (tools/sanitize.sh, one log per shard) -> one verdict.

Each report is owned by the kernel it names: ours (the families' namespaces and jk::) or another
library's (PyTorch's at::native, cuBLAS, ...). Only ours can fail the run; the others are counted and
named, since the tools also flag library kernels (initcheck: PyTorch's multi-block reductions read their
own staging buffer; results/session9). A report without a kernel (a failed API call, the tool's own
error, the test process exiting with an error or crashing) fails the run, as do failed tests and
shards that ended without the tool's summary.
    python tools/sanitize_summary.py TOOL SECONDS TIMES_LOG SHARD_LOG...
"""
import collections
import re
import sys

OURS = {"jk", "fused", "ebm", "sampling", "diffusion", "linalg"}
# Lines of the tool's own that are not reports.
NOT_REPORTS = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "LEAK SUMMARY")
KERNEL = re.compile(r"\bat (?:0x[0-9a-f]+ in \S+ )?(?:void )?([A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)")
TEST = re.compile(r"^(tests/\S+::\S+)")


def reports(path):
    """(message, kernel or None, test) for each report in one shard's log."""
    test, found, current = None, [], None
    for line in open(path, errors="replace"):
        if (start := line.find("=========")) > 0 and not TEST.match(line):
            line = line[start:]  # pytest's progress dots before the tool's line
        match = TEST.match(line)
        if match:
            test = match.group(1)
            line = line[match.end():].lstrip(" ")  # pytest -v: the first report can share the line
        if line.startswith("=========     ") and current is not None:
            if current[1] is None and (kernel := KERNEL.search(line)):
                current[1] = kernel.group(1)
        elif line.startswith("========= ") and line[10:11] != " ":
            message = line[10:].strip()
            # pytest's closing line ("========= 148 passed, 1928 deselected in 225.52s ======...") can
            # begin like the tool's: the tool's lines never end in "=".
            if message.startswith(NOT_REPORTS) or not message or message.endswith("="):
                current = None
                continue
            kernel = KERNEL.search(message)
            current = [message, kernel.group(1) if kernel else None, test]
            found.append(current)
    return found


def main(tool, seconds, times_log, *shard_logs):
    outcomes = collections.Counter()
    try:
        for line in open(times_log):
            outcomes[line.split()[1]] += 1
    except FileNotFoundError:
        pass
    ours, others, unowned = collections.Counter(), collections.Counter(), collections.Counter()
    ours_tests = collections.Counter()
    cut = 0
    for path in shard_logs:
        text = open(path, errors="replace").read()
        cut += "SUMMARY" not in text
        for message, kernel, test in reports(path):
            kind = re.sub(r" of size \d+ bytes| \(error \d+\).*|\.$", "", message)[:70]
            if kernel is None:  # the tool's own failure, a failed API call, or pytest exiting with an error
                unowned[kind] += 1
            elif kernel.split("::")[0] in OURS:
                ours[f"{kernel}: {kind}"] += 1
                ours_tests[test] += 1
            else:
                others[f"{kernel}: {kind}"] += 1
    clean = not ours and not unowned and not cut and outcomes["failed"] == 0 and outcomes["passed"] > 0
    print(f"{tool}: {'CLEAN' if clean else 'NOT CLEAN'} in {seconds} s over {len(shard_logs)} processes; "
          f"tests {dict(outcomes)}; our kernels: {sum(ours.values())} reports; other libraries' kernels: "
          f"{sum(others.values())}; without a kernel: {sum(unowned.values())}; cut off: {cut}")
    for title, counter in (("ours", ours), ("tests with ours", ours_tests), ("other libraries", others),
                           ("without a kernel", unowned)):
        for key, count in counter.most_common(8):
            print(f"    {title}: {count} x {key}")
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
