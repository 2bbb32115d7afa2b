"""Reliability: the fault walk (tests/fault_walk.c, bench/bench_faults.c). Every operation
that changes the registry or the address space is run with each of its system calls failing
in turn, and what the library promises is checked after every failure."""
from report import distinct_param, esc, fmt_num, table

KEY = "reliability"
TITLE = "Reliability: injected system-call failures"
ORDER = 90
PROGRAMS = ["bench_faults"]
TIMEOUT = 300

INTRO = (
    "src/os is the only code that calls the kernel, and it can fail on purpose: the walk makes "
    "the N-th call of one kind (open, read, write, size, name, map, move, protect, lock, "
    "mount, pool) fail with ENOSPC, EIO, ENOMEM, EACCES and EINTR in turn, for every N the "
    "operation reaches, then checks: the call returned an error code and a message; the "
    "registry is exactly as before (every file with its mode, size and contents, the private "
    "mounts and, for huge-page operations, the pools); the process's mappings, descriptors and "
    "current address space are as before; and the operation succeeds when retried. "
    "<b>failed cleanly</b>: all of that held. <b>tolerated</b>: the operation succeeded despite "
    "the fault (an EINTR the wrapper retried, a best-effort call such as a chmod that only "
    "widens a mode). The CLI rows run <code>exomem</code> with <code>EXOMEM_FAULT</code>, "
    "walking N upward until the command succeeds. A quick run injects EIO only.")


def _op_rows(entries):
    return distinct_param(entries, "op")


def _value(entries, name, op):
    for e in entries:
        if e["name"] == name and e["params"].get("op") == op:
            return e
    return None


def render(entries, papers, out, plots):
    rows = []
    totals = [0, 0, 0]
    for op in _op_rows(entries):
        skipped = _value(entries, "faults_skipped", op)
        if skipped:
            rows.append([esc(op), "-", "-", "-", "-", "skipped"])
            continue
        vals = [_value(entries, n, op) for n in
                ("faults_calls", "faults_injected", "faults_failed_clean", "faults_tolerated",
                 "faults_broken")]
        nums = [v["median"] if v else 0 for v in vals]
        for i in range(3):
            totals[i] += nums[i + 1]
        rows.append([esc(op)] + [fmt_num(n) for n in nums[:4]] +
                    ["<b>BROKEN</b>" if nums[4] else "ok"])
    html = [table(["operation", "system calls", "faults injected", "failed cleanly",
                   "tolerated", "promises"], rows)]
    html.append("<p>In all: %s faults injected, %s failed cleanly and then succeeded on retry, "
                "%s tolerated.</p>" % tuple(fmt_num(t) for t in totals))
    return "\n".join(html)


def targets(entries):
    broken = [e for e in entries if e["name"] == "faults_broken" and e["median"]]
    injected = [e for e in entries if e["name"] == "faults_injected"]
    if not injected:
        return [{"target": "every injected fault leaves the registry and process as they were",
                 "verdict": "no data", "detail": ""}]
    return [{"target": "every injected fault leaves the registry and process as they were",
             "verdict": "not met" if broken else "met",
             "detail": "; ".join(esc(e["params"].get("op", "")) for e in broken)}]


def selftest(check):
    e = [{"name": n, "params": {"op": "x"}, "median": v} for n, v in
         (("faults_calls", 3), ("faults_injected", 15), ("faults_failed_clean", 10),
          ("faults_tolerated", 5), ("faults_broken", 0))]
    html = render(e, [], None, False)
    check("15 faults injected" in html and "ok" in html, "reliability renders its totals")
    check(targets(e)[0]["verdict"] == "met", "reliability target met without broken rows")
