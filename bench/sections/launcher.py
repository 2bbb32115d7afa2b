"""The launcher (`exomem run --heap-segment`, docs/launcher.md): unmodified Debian programs
(hpcc, xz -9) with their malloc heap in one segment of 4K, 2M or 1G pages, against the same
binary run plainly and under libhugetlbfs's `hugectl --heap` (bench/bench_launcher.c)."""
import os

import report
from report import esc, fmt_num, table

KEY = "launcher"
# (A typographic apostrophe: the title must read the same after HTML escaping.)
TITLE = "Launcher: an unmodified program’s heap in one segment"
ORDER = 80
PROGRAMS = ["bench_launcher"]
TIMEOUT = 1200

INTRO = (
    "Debian's own binaries, unmodified, each run five ways with the same arguments: "
    "<b>plain</b> (glibc malloc; THP is in 'madvise' mode here, so the heap is on 4K pages); "
    "<b>seg 4K</b>, <b>seg 2M</b>, <b>seg 1G</b>: <code>exomem run --heap-segment 1G "
    "[--page 2m|1g] -- PROGRAM</code>, which serves malloc and friends from one contiguous "
    "1 GiB segment of that page size (see docs/launcher.md); <b>hugectl</b>: libhugetlbfs's "
    "<code>hugectl --heap PROGRAM</code>, the classic way to put a heap on huge pages. "
    "Programs: <b>hpcc</b> (HPC Challenge, one MPI process, N chosen so RandomAccess has a "
    "64 MiB table; the whole suite runs, so only part of its time is TLB-bound; hpcc's own "
    "GUP/s are shown too) and <b>xz -9</b> (LZMA's bt4 match finder: hash chains and binary "
    "trees over hundreds of MiB of malloc'd tables) compressing 4 MiB of generated text. "
    "Every run is checked (exit status; hpcc's Success=1 and no FAILED; xz's output equal to "
    "the plain run's, which decompresses to the input); a failed run is listed under Runs, "
    "not timed. Rounds interleave the variants; each program first runs once untimed. "
    "Wall time is the measure; CPU time (user+sys of the program and the children it "
    "waited for) is shown too, since this 2-core VM is shared with other work while the "
    "report runs. 'heap resident' is the peak resident size of the segment's range and "
    "'hugetlb' the peak huge pages the program held, both sampled from /proc/PID/smaps every "
    "200 ms: they show where the heap really was.")

VARIANTS = ["plain", "seg4k", "seg2m", "seg1g", "hugectl"]
LABEL = {"plain": "plain", "seg4k": "seg 4K", "seg2m": "seg 2M", "seg1g": "seg 1G",
         "hugectl": "hugectl --heap"}
COLOR = {"plain": "tab:gray", "seg4k": "tab:blue", "seg2m": "tab:orange", "seg1g": "tab:green",
         "hugectl": "tab:purple"}
GUPS_TESTS = ["SingleRandomAccess", "StarRandomAccess", "MPIRandomAccess"]


def find(entries, name, program, variant, **extra):
    for e in entries:
        p = e["params"]
        if (e["name"] == name and p.get("program") == program and p.get("variant") == variant
                and all(p.get(k) == v for k, v in extra.items())):
            return e
    return None


def programs_of(entries):
    return report.distinct_param(entries, "program")


def speedup(e, base):
    """How many times faster e is than base: base/e for times, e/base for rates; None when
    either is missing."""
    if e is None or base is None or not e["median"] or not base["median"]:
        return None
    if e["unit"].endswith("/s"):
        return e["median"] / base["median"]
    return base["median"] / e["median"]


def fmt_speedup(x):
    return "-" if x is None else "<b>%.2fx</b>" % x


def hugectl_note(entries):
    """What libhugetlbfs said about the heap (the note of the hugectl runs), or None."""
    for e in entries:
        if e["params"].get("variant") == "hugectl" and e.get("note"):
            return e["note"]
    return None


def program_table(entries, program):
    rows = []
    for v in VARIANTS:
        wall = find(entries, "launcher_seconds", program, v)
        if wall is None:
            continue
        cpu = find(entries, "launcher_cpu_seconds", program, v)
        heap = find(entries, "launcher_heap_resident", program, v)
        huge = find(entries, "launcher_hugetlb", program, v)
        rows.append([
            esc(LABEL[v]), "%s s" % report.fmt_stat(wall),
            fmt_speedup(speedup(wall, find(entries, "launcher_seconds", program, "plain"))),
            "%s s" % report.fmt_stat(cpu) if cpu else "-",
            fmt_speedup(speedup(cpu, find(entries, "launcher_cpu_seconds", program, "plain"))),
            "%s MiB" % fmt_num(heap["median"]) if heap else "-",
            "%s MiB" % fmt_num(huge["median"]) if huge else "-",
            "%d" % wall["repeats"]])
    if not rows:
        return "<p><i>No successful runs of %s.</i></p>" % esc(program)
    return table(["variant", "wall time, median [min&ndash;max]", "speedup vs plain",
                  "CPU time", "CPU speedup", "heap resident", "hugetlb", "runs"], rows)


def gups_table(entries):
    rows = []
    for v in VARIANTS:
        row = [esc(LABEL[v])]
        have = False
        for test in GUPS_TESTS:
            e = find(entries, "hpcc_gups", "hpcc", v, test=test)
            if e is None:
                row.append("-")
                continue
            have = True
            base = find(entries, "hpcc_gups", "hpcc", "plain", test=test)
            row.append("%s GUP/s<br>%s" % (report.fmt_stat(e), fmt_speedup(speedup(e, base))))
        if have:
            rows.append(row)
    if not rows:
        return ""
    return ("<h3>hpcc's own RandomAccess results</h3>" +
            table(["variant"] + ["%s (speedup vs plain)" % t for t in GUPS_TESTS], rows))


def plot(entries, path):
    """Speedup over plain per program (wall and CPU time) and per hpcc GUP/s test."""
    plt = report.pyplot()
    groups = []   # (label, {variant: (median, lo, hi)})
    for prog in programs_of(entries):
        for name, what in (("launcher_seconds", "wall"), ("launcher_cpu_seconds", "CPU")):
            base = find(entries, name, prog, "plain")
            vals = {}
            for v in VARIANTS:
                e = find(entries, name, prog, v)
                if e is not None and base is not None and base["median"]:
                    vals[v] = (base["median"] / e["median"], base["median"] / e["max"],
                               base["median"] / e["min"])
            if vals:
                groups.append(("%s\n%s time" % (prog, what), vals))
    for test in GUPS_TESTS:
        base = find(entries, "hpcc_gups", "hpcc", "plain", test=test)
        vals = {}
        for v in VARIANTS:
            e = find(entries, "hpcc_gups", "hpcc", v, test=test)
            if e is not None and base is not None and base["median"]:
                vals[v] = (e["median"] / base["median"], e["min"] / base["median"],
                           e["max"] / base["median"])
        if vals:
            groups.append(("hpcc\n%s" % test.replace("RandomAccess", " RA"), vals))
    fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(groups) + 2), 4.8))
    width = 0.8 / len(VARIANTS)
    for i, v in enumerate(VARIANTS):
        xs, ys, lo, hi = [], [], [], []
        for g, (_, vals) in enumerate(groups):
            if v in vals:
                m, a, b = vals[v]
                xs.append(g + (i - (len(VARIANTS) - 1) / 2) * width)
                ys.append(m)
                lo.append(max(0.0, m - a))
                hi.append(max(0.0, b - m))
        if xs:
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, color=COLOR[v], label=LABEL[v])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g[0] for g in groups], fontsize=8)
    ax.set_ylabel("speedup over plain (median; bars = min..max)")
    ax.set_title("exomem run --heap-segment vs the plain binary and hugectl --heap")
    ax.grid(True, axis="y", alpha=0.4)
    if groups:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def render(entries, papers, out, plots):
    parts = []
    note = hugectl_note(entries)
    if note:
        parts.append("<p><b>What hugectl did here:</b> %s. libhugetlbfs puts a heap on huge "
                     "pages through glibc's <code>__morecore</code> hook, which glibc 2.34 "
                     "removed; with Debian 12's glibc 2.36 <code>hugectl --heap</code> runs the "
                     "program unchanged on 4K pages (its hugetlb column is 0), so its times "
                     "are a second plain run.</p>" % esc(note.rstrip(".")))
    for prog in programs_of(entries):
        parts.append("<h3>%s</h3>" % esc(prog))
        parts.append(program_table(entries, prog))
    parts.append(gups_table(entries))
    if plots and entries:
        plot(entries, os.path.join(out, "launcher.png"))
        parts.append("<p><img src=\"launcher.png\" alt=\"%s\"></p>" % esc(TITLE))
    return "\n".join(parts)


def selftest(check):
    def e(name, unit, prog, variant, med, lo, hi, **extra):
        return {"name": name, "unit": unit, "params": dict(program=prog, variant=variant, **extra),
                "median": med, "min": lo, "max": hi, "repeats": 5, "note": None}
    entries = [
        e("launcher_seconds", "s", "xz", "plain", 10.0, 9.0, 11.0),
        e("launcher_seconds", "s", "xz", "seg2m", 8.0, 7.5, 9.0),
        e("launcher_cpu_seconds", "s", "xz", "plain", 9.0, 9.0, 9.0),
        e("launcher_cpu_seconds", "s", "xz", "seg2m", 6.0, 6.0, 6.0),
        e("launcher_heap_resident", "MiB", "xz", "seg2m", 80.0, 80.0, 80.0),
        e("launcher_hugetlb", "MiB", "xz", "seg2m", 80.0, 80.0, 80.0),
        e("launcher_seconds", "s", "xz", "hugectl", 10.0, 10.0, 10.0),
        e("hpcc_gups", "GUP/s", "hpcc", "plain", 0.05, 0.04, 0.06, test="SingleRandomAccess"),
        e("hpcc_gups", "GUP/s", "hpcc", "seg1g", 0.1, 0.1, 0.1, test="SingleRandomAccess"),
    ]
    entries[6]["note"] = "libhugetlbfs: Not setting up morecore <x>"
    check(abs(speedup(entries[1], entries[0]) - 1.25) < 1e-12, "launcher: time speedup = base/e")
    check(abs(speedup(entries[8], entries[7]) - 2.0) < 1e-12, "launcher: GUP/s speedup = e/base")
    check(speedup(None, entries[0]) is None, "launcher: no entry, no speedup")
    check(programs_of(entries) == ["xz", "hpcc"], "launcher: programs in order of appearance")
    html = program_table(entries, "xz")
    check("1.25x" in html and "1.50x" in html and "80 MiB" in html,
          "launcher: xz table has wall and CPU speedups and the heap sizes")
    check("seg 1G" not in html and "hugectl" in html, "launcher: only measured variants listed")
    check("No successful runs" in program_table(entries, "sort"), "launcher: empty program")
    g = gups_table(entries)
    check("2.00x" in g and "seg 1G" in g, "launcher: hpcc GUP/s table with speedup")
    out = render(entries, [], "/nonexistent", False)
    check("&lt;x&gt;" in out and "<h3>xz</h3>" in out and "<img" not in out,
          "launcher: render escapes the hugectl note and draws nothing without plots")
