"""Report section: CARAT on real programs (PLDI 2020, Table 1, Figures 3, 5, 6, 7 and 9,
Table 2): Debian source packages built with exomem-cc in seven modes, their own test suites
run in each mode and under moves, their workloads timed side by side (bench/carat/)."""
import math
import os

import report
from carat import evaluate  # bench/ is on sys.path (run.py)
from report import by_name, esc, fmt_bytes, fmt_num, table

KEY = "carat_programs"
TITLE = "CARAT on real programs: guards, tracking and moves (Table 1, Figures 3, 5-7, 9, Table 2)"
ORDER = 401
PROGRAMS = ["bench_carat_programs"]
PAPER_PLACES = [("carat", w) for w in ("Table 1", "Figure 3", "Figure 5", "Figure 7",
                                        "Figure 9")]
TIMEOUT = 2900
# The quick form's own budget is 1200 s (bench/carat/evaluate.py): most of it goes on the
# first run's fourteen builds, which later runs reuse.
QUICK_TIMEOUT = 1300

MODES = ["base", "track", "shadow", "guards-noopt", "guards", "carat", "asan"]
MODE_TEXT = {
    "base": "clang-19 -O2",
    "track": "allocation and escape tracking",
    "shadow": "tracking, escapes in the shadow",
    "guards-noopt": "guards, no optimisation",
    "guards": "guards, optimised",
    "carat": "tracking (shadow) and guards",
    "asan": "AddressSanitizer",
}

INTRO = (
    "Real C programs that no one here wrote, fetched with <code>apt-get source</code> from "
    "Debian 12 (bench/carat/programs/ has one recipe each: how to build, its own test "
    "suite, a timed workload) and built with clang-19 -O2 in seven modes: plain (the "
    "baseline), with the plugin's allocation and escape tracking (the paper's "
    "Allocation-to-Escape map), with tracking whose escapes are kept in a shadow of memory "
    "instead (opt-in, docs/carat-shadow.md), with guards without and "
    "with the four optimisations, with tracking (escapes in the shadow) and guards together "
    "(what moves need), and with AddressSanitizer, the peer. Each program's test suite runs "
    "in the plain, tracking and guards builds and, in the tracking-and-guards build, while "
    "the runtime moves the "
    "allocation with the most escapes 1, 100 and 10,000 times a second (and in the escape "
    "log's build at the highest rate, last, so that a short budget cuts it first). "
    "Workload times are medians of the repeats, "
    "all modes interleaved in one run. Builds are cached in the build directory "
    "(bench-data/carat), so a second report run only runs. The <b>quick form</b> runs two "
    "programs (those whose recipe says QUICK=yes), two move rates (100 and 10,000 a "
    "second) and two repeats; the programs it leaves out are listed below. Not measured: "
    "the paper's physical-page moves (we move whole heap allocations under the kernel's "
    "paging) and MPX-assisted guards (no MPX on this CPU).")


def programs(entries):
    return sorted({e["params"]["program"] for e in entries if "program" in e["params"]})


RECIPES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "carat", "programs")
# The move rates the targets ask for (bench/carat/evaluate.py's FULL_RATES).
TARGET_RATES = (1, 100, 10000)


def all_programs():
    """Every program the evaluation has a recipe for."""
    try:
        return sorted(f[:-3] for f in os.listdir(RECIPES) if f.endswith(".sh"))
    except OSError:
        return []


def extra_programs():
    """The recipes marked EXTRA=yes (minimap2, the multi-threaded one): shown beside the
    programs the issue names, whose geomeans the targets are, but not judged with them.
    Read as the evaluation reads them (bench/carat/evaluate.py, which runs them last)."""
    out = []
    for p in all_programs():
        try:
            if evaluate.read_recipe_vars(os.path.join(RECIPES, p + ".sh")).get("EXTRA") == "yes":
                out.append(p)
        except OSError:
            pass
    return out


def left_out(every, judged):
    """Why a target cannot be called met from `judged` alone, or None: a target is over all
    the programs, and a quick run (two programs) or a cut budget measures fewer."""
    missing = [p for p in every if p not in judged]
    if not missing:
        return None
    return "not judged: %d of the %d programs measured (%s missing; the quick form or the " \
           "time budget left them out)" % (len(every) - len(missing), len(every),
                                           ", ".join(missing))


def find(entries, name, **params):
    for e in entries:
        if e["name"] == name and all(e["params"].get(k) == v for k, v in params.items()):
            return e
    return None


def ratio(entries, prog, mode):
    """Median workload time in mode over base, or None."""
    e = find(entries, "carat_workload", program=prog, mode=mode)
    b = find(entries, "carat_workload", program=prog, mode="base")
    if not e or not b or not b["median"]:
        return None
    return e["median"] / b["median"]


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def pct(r):
    return "-" if r is None else "%+.1f%%" % ((r - 1) * 100)


def moved_runs(entries):
    """The (mode, move rate) pairs the suites ran under moves: the tracking-and-guards
    build's first, then the escape log's."""
    return sorted({(e["params"]["mode"], e["params"].get("moves_per_s", 0))
                   for e in by_name(entries, "carat_suite_pass")
                   if e["params"].get("moves_per_s", 0)},
                  key=lambda mr: (mr[0] != "carat", mr[0], mr[1]))


def suite_modes(entries):
    """The modes whose suite ran without moves (bench/carat/evaluate.py SUITE_MODES), in
    MODES' order."""
    ran = {e["params"]["mode"] for e in by_name(entries, "carat_suite_pass")
           if not e["params"].get("moves_per_s", 0)}
    return [m for m in MODES if m in ran]


def suite_rows(entries):
    runs = [(m, 0) for m in suite_modes(entries)] + moved_runs(entries)
    rows = []
    for p in programs(entries):
        cells = [esc(p)]
        for mode, rate in runs:
            e = find(entries, "carat_suite_pass", program=p, mode=mode, moves_per_s=rate)
            t = find(entries, "carat_suite_time", program=p, mode=mode, moves_per_s=rate)
            if not e:
                cells.append("-")
                continue
            text = ("pass" if e["min"] >= 1 else "<b>FAIL</b>") + " (%s s)" % fmt_num(t["median"] if t else None)
            if rate:
                done = find(entries, "carat_suite_moves", program=p, mode=mode, moves_per_s=rate)
                ref = find(entries, "carat_suite_moves_refused", program=p, mode=mode, moves_per_s=rate)
                pin = find(entries, "carat_suite_pinned", program=p, mode=mode, moves_per_s=rate)
                if done:
                    text += ", %s moves, %s refused" % (fmt_num(done["median"]),
                                                        fmt_num(ref["median"] if ref else 0))
                if pin and pin["median"]:
                    text += ", %s pinned" % fmt_num(pin["median"])
            cells.append(text)
        rows.append(cells)
    return rows


def suite_header(entries):
    return ["program"] + suite_modes(entries) + ["%s, %s moves/s" % (m, fmt_num(r)) for m, r in moved_runs(entries)]


def overhead_rows(entries):
    rows = []
    for p in programs(entries):
        b = find(entries, "carat_workload", program=p, mode="base")
        rows.append([esc(p), report.fmt_stat(b) if b else "-"] +
                    [pct(ratio(entries, p, m)) for m in MODES[1:]])
    rows.append(["<b>geomean</b>", ""] +
                ["<b>%s</b>" % pct(geomean([ratio(entries, p, m) for p in programs(entries)]))
                 for m in MODES[1:]])
    return rows


def guard_rows(entries):
    counts = ("guards_naive", "opt_value_range", "opt_redundant", "opt_hoisted", "opt_merged",
              "opt_coalesced", "opt_versioned", "guards_final")
    rows = []
    for p in programs(entries):
        got = {c: find(entries, "carat_guards", program=p, mode="guards", count=c) for c in counts}
        if not got["guards_naive"]:
            continue
        naive = got["guards_naive"]["median"] or 1
        cells = [esc(p), fmt_num(naive)]
        for c in counts[1:]:
            v = got[c]["median"] if got[c] else 0
            cells.append("%s (%.1f%%)" % (fmt_num(v), 100.0 * v / naive))
        slow = find(entries, "carat_guard_slow", program=p, mode="guards")
        cells.append(fmt_num(slow["median"]) if slow else "-")
        rows.append(cells)
    return rows


def escape_hist(entries, prog=None):
    hist = [0] * 16
    for e in by_name(entries, "carat_escape_hist"):
        if prog is None or e["params"]["program"] == prog:
            hist[e["params"]["bucket"]] += e["median"]
    return hist


def bucket_label(b):
    if b == 0:
        return "0"
    lo, hi = 1 << (b - 1), (1 << b) - 1
    return str(lo) if lo == hi else "%d-%d" % (lo, hi)


def escape_rows(entries):
    rows = []
    for p in programs(entries) + [None]:
        h = escape_hist(entries, p)
        n = sum(h)
        if not n:
            continue
        le7, le15 = sum(h[:4]), sum(h[:5])
        allocs = find(entries, "carat_allocations", program=p) if p else None
        escs = find(entries, "carat_escapes", program=p) if p else None
        rows.append([esc(p) if p else "<b>all</b>", fmt_num(n),
                     "%.1f%%" % (100.0 * h[0] / n), "%.1f%%" % (100.0 * le7 / n),
                     "%.1f%%" % (100.0 * le15 / n),
                     bucket_label(max(i for i, v in enumerate(h) if v)),
                     fmt_num(escs["median"] / allocs["median"]) if allocs and escs and allocs["median"] else "-"])
    return rows


def memory_rows(entries):
    rows = []
    for p in programs(entries):
        t = find(entries, "carat_table_peak", program=p)
        rss = find(entries, "carat_table_process_rss", program=p)
        if not t:
            continue
        rows.append([esc(p), fmt_bytes(t["median"]),
                     fmt_bytes(rss["median"]) if rss else "-",
                     "%.2f%%" % (100.0 * t["median"] / rss["median"])
                     if rss and rss["median"] else "-"])
    return rows


def move_rows(entries):
    rows = []
    for p in programs(entries):
        for e in sorted((e for e in by_name(entries, "carat_workload_moves")
                         if e["params"]["program"] == p),
                        key=lambda e: e["params"]["moves_per_s"]):
            r = e["params"]["moves_per_s"]
            done = find(entries, "carat_workload_moves_done", program=p, moves_per_s=r)
            ref = find(entries, "carat_workload_moves_refused", program=p, moves_per_s=r)
            rate = done["median"] / e["median"] if done and e["median"] else None
            causes = ["%s %s" % (c["params"]["cause"], fmt_num(c["median"]))
                      for c in by_name(entries, "carat_workload_moves_refused_by")
                      if c["params"]["program"] == p and c["params"]["moves_per_s"] == r
                      and c["median"]]
            refused = fmt_num(ref["median"]) if ref else "-"
            if causes:
                refused += " (%s)" % ", ".join(causes)
            rows.append([esc(p), fmt_num(r), report.fmt_stat(e), pct(e.get("ratio")),
                         fmt_num(done["median"]) if done else "-", refused, fmt_num(rate)])
    return rows


def vmstat_rows(entries):
    keys = sorted({e["params"]["counter"] for e in by_name(entries, "carat_vmstat_rate")})
    rows = []
    for p in programs(entries):
        vals = [find(entries, "carat_vmstat_rate", program=p, counter=k) for k in keys]
        if any(vals):
            rows.append([esc(p)] + [fmt_num(v["median"]) if v else "-" for v in vals])
    return keys, rows


def plot_overheads(entries, path):
    plt = report.pyplot()
    progs = programs(entries)
    modes = MODES[1:]
    fig, ax = plt.subplots(figsize=(10, 4))
    width = 0.8 / len(modes)
    for i, m in enumerate(modes):
        ys = [((ratio(entries, p, m) or 1) - 1) * 100 for p in progs + ["geomean"]
              if p != "geomean"]
        g = geomean([ratio(entries, p, m) for p in progs])
        ys.append(((g or 1) - 1) * 100)
        ax.bar([x + i * width for x in range(len(progs) + 1)], ys, width, label=MODE_TEXT[m])
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(progs) + 1)])
    ax.set_xticklabels(progs + ["geomean"])
    ax.set_ylabel("time overhead over clang -O2 (%)")
    ax.set_yscale("symlog", linthresh=10)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_escapes(entries, path):
    plt = report.pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for p in programs(entries):
        h = escape_hist(entries, p)
        n = sum(h)
        if not n:
            continue
        last = max(i for i, v in enumerate(h) if v)
        cum, ys = 0, []
        for v in h[:last + 1]:
            cum += v
            ys.append(100.0 * cum / n)
        ax.plot([bucket_label(b) for b in range(last + 1)], ys, marker="o", label=p)
    ax.set_xlabel("escapes per allocation (at most)")
    ax.set_ylabel("allocations (%, cumulative)")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def paper_line(papers, where):
    got = [n for n in papers if n.get("paper") == "carat" and n.get("where") == where]
    return "; ".join('"%s"' % esc(n.get("quote", n["name"])) for n in got)


def render(entries, papers, out, plots):
    if not programs(entries):
        return ""
    parts = ["<h3>Test suites with tracking, with guards and under moves</h3>",
             "<p>Each program's own test suite (pass or FAIL, and its time); under moves, how "
             "many moves the runtime made, how many it refused (a stopped thread held an "
             "address derived from the block or worked on it in the C library, or no copy "
             "could be placed: the causes are in Figure 9's table), and how many "
             "allocations were pinned because the program printed their address with %p (docs/carat.md).</p>",
             table(suite_header(entries), suite_rows(entries))]
    parts.append("<h3>Figures 3 and 6: time overhead of guards and tracking; AddressSanitizer "
                 "as the peer</h3>")
    parts.append("<p>Workload time in each mode against clang-19 -O2 (the base column: "
                 "median [min&ndash;max] seconds). Paper: %s; tracking: %s.</p>"
                 % (paper_line(papers, "Figure 3"), paper_line(papers, "Figure 7")))
    if plots:
        plot_overheads(entries, os.path.join(out, "carat_fig3.png"))
    parts.append('<img src="carat_fig3.png" alt="time overhead per mode">')
    parts.append(table(["program", "base (s)"] + [MODE_TEXT[m] for m in MODES[1:]],
                       overhead_rows(entries)))
    rows = guard_rows(entries)
    if rows:
        mean = [n for n in papers if n.get("paper") == "carat" and n.get("where") == "Table 1"
                and n["params"].get("benchmark") == "Arith. Mean"]
        parts.append("<h3>Table 1: static guards and what each optimisation removed</h3>")
        parts.append("<p>Guards the pass would insert without optimisations (loads, stores, "
                     "calls, memory intrinsics), and how many each optimisation removed, in "
                     "the order they run, and the guards left, summed over each program's "
                     "modules. Coalesced is not the paper's: guards of one basic block at one "
                     "base plus constant offsets become one check over all their bytes. Versioned is not "
                     "either: the guards dropped from copies of loops and call-free functions "
                     "that run only after one check of the whole range their accesses can "
                     "reach (the naive count includes the guarded copies). Slow path: the "
                     "checks of the workload run (every process) that left the inline compare "
                     "for the runtime's search of the regions; with the default single region "
                     "only an access above the top of the process's memory would. The paper's arithmetic mean over its 22 benchmarks: %s.</p>"
                     % esc(", ".join("%s %s" % (n["what"], fmt_num(n["value"])) for n in mean)))
        parts.append(table(["program", "guards (naive)", "value range", "redundant",
                            "hoisted", "merged (SCEV)", "coalesced (ours)", "versioned (ours)",
                            "left", "slow path (workload)"], rows))
    rows = escape_rows(entries)
    if rows:
        parts.append("<h3>Figure 5: escapes per allocation</h3>")
        parts.append("<p>Allocations of the workload run (tracking build, every process) by "
                     "the pointers to them stored in memory when they were freed or at exit. "
                     "Paper: %s</p>" % paper_line(papers, "Figure 5"))
        if plots:
            plot_escapes(entries, os.path.join(out, "carat_fig5.png"))
        parts.append('<img src="carat_fig5.png" alt="escapes per allocation">')
        parts.append(table(["program", "allocations", "no escape", "at most 7", "at most 15",
                            "most (bucket)", "escape events per allocation"], rows))
    rows = memory_rows(entries)
    if rows:
        parts.append("<h3>Figure 7: tracking's memory</h3>")
        parts.append("<p>The runtime's allocation table and escape map at their peak, in "
                     "the workload's process where they were largest (tracking build), "
                     "against that process's peak resident memory.</p>")
        parts.append(table(["program", "table peak", "process peak RSS", "table / RSS"],
                           rows))
    rows = move_rows(entries)
    if rows:
        parts.append("<h3>Figure 9: moves against move rate</h3>")
        parts.append("<p>Workload time of the tracking-and-guards build (escapes in the "
                     "shadow: a move scans the shadow for them) while the runtime "
                     "moves the worst-case allocation, against the same build without moves. "
                     "Refused moves change nothing; their causes (exo_carat_refusal): "
                     "<i>derived</i>, a stopped thread held an address derived from the block; "
                     "<i>libc</i>, a thread stopped in the C library held it in a register "
                     "(its memory functions at work on it); <i>no_copy</i>, no block at the "
                     "same address modulo its alignment; <i>logged</i>, too many logged stores "
                     "into it; <i>altstack</i>, a thread on its alternate signal stack. The "
                     "rate achieved is moves done over the run time. Paper: %s</p>"
                     % paper_line(papers, "Figure 9"))
        parts.append(table(["program", "moves/s asked", "time (s)", "overhead", "moves done",
                            "refused", "moves/s done"], rows))
    keys, rows = vmstat_rows(entries)
    if rows:
        parts.append("<h3>Table 2: the kernel's own page work for the same programs</h3>")
        parts.append("<p>/proc/vmstat counters per second of the base build's workload (the "
                     "whole machine's counters: other activity adds to them).</p>")
        parts.append(table(["program"] + keys, rows))
    return "\n".join(parts)


def verdict(good, partial):
    """met / not met, except that a good result over part of the programs proves nothing."""
    return "not met" if not good else "no data" if partial else "met"


def targets(entries, every=None, extras=None):
    """The issue's targets, over the programs it names (every: all recipes but the extra
    ones); an extra program's figure is shown beside them, and its failed suites count."""
    measured = programs(entries)
    if not measured:
        return [{"target": "CARAT on real programs", "verdict": "no data",
                 "detail": "bench_carat_programs did not run"}]
    extras = extras if extras is not None else extra_programs()
    progs = [p for p in measured if p not in extras]
    every = every if every is not None else (
        [p for p in all_programs() if p not in extras] or progs)
    out = []
    for mode, limit, what in (("track", 0.02, "tracking at most 2% geomean time overhead "
                                              "(paper 1.9%)"),
                              ("shadow", 0.02, "escapes in the shadow (opt-in): tracking at "
                                               "most 2% geomean"),
                              ("guards", 0.10, "guards with optimisations at most 10% geomean "
                                               "(paper 5.9% with MPX)")):
        timed = [p for p in progs if ratio(entries, p, mode) is not None]
        g = geomean([ratio(entries, p, mode) for p in timed])
        why = left_out(every, timed)
        beside = ["%s %s" % (p, pct(ratio(entries, p, mode))) for p in measured
                  if p in extras and ratio(entries, p, mode) is not None]
        out.append({"target": what, "verdict": "no data" if g is None else
                    verdict(g - 1 <= limit, why),
                    "detail": "%s over %s%s%s" % (
                        pct(g), ", ".join(timed) or "no program", "; " + why if why else "",
                        "; not judged with them: " + ", ".join(beside) if beside else "")})
    both = [p for p in progs if ratio(entries, p, "guards") and ratio(entries, p, "asan")]
    g_guard = geomean([ratio(entries, p, "guards") for p in both])
    g_asan = geomean([ratio(entries, p, "asan") for p in both])
    if g_guard and g_asan:
        x = (g_asan - 1) / max(g_guard - 1, 1e-9)
        why = left_out(every, both)
        out.append({"target": "guards at least 5x cheaper than AddressSanitizer",
                    "verdict": verdict(x >= 5, why),
                    "detail": "overheads %s against %s: %.1fx%s" % (
                        pct(g_guard), pct(g_asan), x, "; " + why if why else "")})
    else:
        out.append({"target": "guards at least 5x cheaper than AddressSanitizer",
                    "verdict": "no data", "detail": "guards or ASan workloads missing"})
    suites = by_name(entries, "carat_suite_pass")
    failed = ["%s/%s%s" % (e["params"]["program"], e["params"]["mode"],
                           "@%d" % e["params"]["moves_per_s"] if e["params"]["moves_per_s"] else "")
              for e in suites if e["min"] < 1]
    # Green needs every program's suite under every rate the issue asks for.
    ran = [p for p in every
           if all(any(e["params"]["program"] == p and e["params"]["moves_per_s"] == r and
                          e["params"]["mode"] == "carat" for e in suites)
                  for r in TARGET_RATES)]
    why = left_out(every, ran)
    if why:
        why = why.replace("measured", "run under 1, 100 and 10,000 moves a second")
    # A workload run that failed (a crash, or output that did not check) is as wrong a
    # result as a failed suite.
    works = by_name(entries, "carat_workload_pass")
    wfailed = ["%s/%s%s" % (e["params"]["program"], e["params"]["mode"],
                            "@%d" % e["params"]["moves_per_s"] if e["params"].get("moves_per_s")
                            else "")
               for e in works if e["min"] < 1]
    out.append({"target": "every test suite and workload green in every mode and under moves",
                "verdict": "no data" if not suites else verdict(not failed and not wfailed, why),
                "detail": "%d of %d suite runs failed%s; workloads: %d of %d builds and rates "
                          "had a failed run%s%s" % (
                    len(failed), len(suites), ": " + ", ".join(failed) if failed else "",
                    len(wfailed), len(works), ": " + ", ".join(wfailed) if wfailed else "",
                    "; " + why if why else "")})
    return out


def selftest(check):
    def e(name, v, **p):
        return {"name": name, "median": v, "min": v, "max": v, "params": p, "ratio": None,
                "repeats": 1}
    ents = [e("carat_workload", 1.0, program="a", mode="base"),
            e("carat_workload", 1.01, program="a", mode="track"),
            e("carat_workload", 1.05, program="a", mode="guards"),
            e("carat_workload", 2.0, program="a", mode="asan"),
            e("carat_suite_pass", 1, program="a", mode="base", moves_per_s=0),
            e("carat_suite_pass", 0, program="a", mode="carat", moves_per_s=100),
            e("carat_suite_time", 3, program="a", mode="base", moves_per_s=0),
            e("carat_guards", 100, program="a", mode="guards", count="guards_naive"),
            e("carat_guards", 40, program="a", mode="guards", count="guards_final"),
            e("carat_guard_slow", 3, program="a", mode="guards"),
            e("carat_escape_hist", 9, program="a", mode="track", bucket=0),
            e("carat_escape_hist", 1, program="a", mode="track", bucket=5)]
    t = {x["target"].split(" ")[0] + x["target"].split(" ")[1]: x
         for x in targets(ents, every=["a"])}
    check(guard_rows(ents)[0][-1] == "3", "carat_programs: the workload's slow-path guards shown")
    check(t["trackingat"]["verdict"] == "met", "carat_programs: tracking target met at 1%")
    check(t["guardswith"]["verdict"] == "met", "carat_programs: guards target met at 5%")
    check(t["guardsat"]["verdict"] == "met", "carat_programs: 20x cheaper than ASan")
    check(t["everytest"]["verdict"] == "not met" and "a/carat@100" in t["everytest"]["detail"],
          "carat_programs: a failed suite under moves is named")
    part = {x["target"].split(" ")[0]: x for x in targets(ents, every=["a", "b"])}
    check(part["tracking"]["verdict"] == "no data" and "1 of the 2" in part["tracking"]["detail"],
          "carat_programs: a target met by part of the programs is not called met")
    check(part["every"]["verdict"] == "not met", "carat_programs: a failed suite is a failure "
          "even in a partial run")
    green = [x for x in ents if x["name"] != "carat_suite_pass"] + [
        e("carat_suite_pass", 1, program="a", mode="carat", moves_per_s=r) for r in TARGET_RATES]
    every = [x for x in targets(green, every=["a"]) if x["target"].startswith("every")][0]
    check(every["verdict"] == "met", "carat_programs: green suites and workloads are met")
    green.append(e("carat_workload_pass", 0, program="a", mode="carat", moves_per_s=100))
    every = [x for x in targets(green, every=["a"]) if x["target"].startswith("every")][0]
    check(every["verdict"] == "not met" and "a/carat@100" in every["detail"],
          "carat_programs: a workload that failed under moves is a failure, named")
    # An extra program (EXTRA=yes) is shown beside the issue's, not judged with them; its
    # failed suite still counts.
    extra = green[:-1] + [e("carat_workload", 1.0, program="x", mode="base"),
                          e("carat_workload", 1.5, program="x", mode="guards")]
    t2 = {x["target"].split(" ")[0] + x["target"].split(" ")[1]: x
          for x in targets(extra, every=["a"], extras=["x"])}
    check(t2["guardswith"]["verdict"] == "met" and "x +50.0%" in t2["guardswith"]["detail"],
          "carat_programs: an extra program's ratio is shown, not judged")
    check(t2["everytest"]["verdict"] == "met", "carat_programs: an extra program's missing "
          "runs under moves leave the suites' target judged")
    extra.append(e("carat_suite_pass", 0, program="x", mode="carat", moves_per_s=100))
    t2 = {x["target"].split(" ")[0]: x for x in targets(extra, every=["a"], extras=["x"])}
    check(t2["every"]["verdict"] == "not met" and "x/carat@100" in t2["every"]["detail"],
          "carat_programs: an extra program's failed suite counts")
    check(abs(ratio(ents, "a", "guards") - 1.05) < 1e-9, "carat_programs: ratio to base")
    check(escape_rows(ents)[0][2] == "90.0%", "carat_programs: share without escapes")
    check(bucket_label(5) == "16-31" and bucket_label(1) == "1", "carat_programs: buckets")
    html = render(ents, [], "/nonexistent", False)
    check("Table 1" in html and "FAIL" in html, "carat_programs: render")
    selftest_driver(check)


def selftest_driver(check):
    """The evaluation driver's memory of each program's time, and its build key."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        ev = evaluate.Evaluation.__new__(evaluate.Evaluation)
        ev.cache = tmp
        ev.cut = False
        for name in ("a", "b", "c"):
            os.makedirs(os.path.join(tmp, "build", name))
        ev.to_run = ["a", "b", "c"]
        check(abs(ev.share("a") - 1 / 3) < 1e-9, "carat driver: equal shares on a first run")
        ev.remember_time("a", 100)
        ev.remember_time("b", 300)
        check(abs(ev.share("a") - 100 / 600) < 1e-9 and abs(ev.share("c") - 200 / 600) < 1e-9,
              "carat driver: shares follow the last run, an unknown counts as the mean")
        ev.cut = True
        ev.remember_time("c", 0.2)
        check(ev.last_time("c") is None, "carat driver: a program cut before it ran is not "
              "remembered as taking nothing")
        ev.remember_time("a", 40)
        check(ev.last_time("a") == 100, "carat driver: a cut run keeps the larger last time")
        ev.cut = False
        ev.remember_time("a", 40)
        check(ev.last_time("a") == 40, "carat driver: a whole run is remembered as it was")
        recipe = os.path.join(tmp, "r.sh")
        text = ("DEB_SOURCE=pkg\nN=3\nbuild_program() {\n  make N=$N\n}\n"
                "run_suite() {\n  make check\n}\nrun_workload() {\n  ./prog 10\n}\n")
        keys = []
        for t in (text, "# a comment\n" + text, text.replace("make check", "make test"),
                  text.replace("./prog 10", "./prog 20"), text.replace("N=3", "N=4"),
                  text.replace("make N=$N", "make -j2 N=$N")):
            with open(recipe, "w") as f:
                f.write(t)
            keys.append(evaluate.recipe_build_key(recipe))
        check(keys[0] == keys[1] == keys[2] == keys[3], "carat driver: comments, suites and "
              "workloads are not in the build key")
        check(len({keys[0], keys[4], keys[5]}) == 3, "carat driver: the build and the variables "
              "it names are in the build key")
