"""Figure 5 of the hybrid segmentation paper (ROSS'14) redone: HPCC RandomAccess (GUPS) with
its table in memory of each page size, as speedup over a 4K segment per table size; the
cost of a software base+bounds check; Debian's hpcc beside our GUPS. fig6_graph500.py uses
the plotting and table helpers defined here."""
import os
import tempfile

import report
from report import esc, fmt_bytes, fmt_num, table

KEY = "fig5"
TITLE = "Figure 5: random access (HPCC RandomAccess) per page size"
ORDER = 50
PROGRAMS = ["bench_gups", "bench_hpcc"]
PAPER_PLACES = [("hybrid-segmentation", "Figure 5")]
TIMEOUT = 1500

INTRO = (
    "HPCC RandomAccess (apps/gups: the official update stream, 128 interleaved sub-streams as "
    "in HPCC's reference code, and HPCC's verification: re-apply the updates, at most 1% of "
    "the table wrong) with its table in anonymous memory or in an exomem segment of 4K, THP, "
    "2M or 1G pages, 1 and 2 threads. Shown: GUP/s and the speedup over the same run in a 4K "
    "segment. The paper compares its segmentation kernel (32-bit, no TLB at all) with 4K and "
    "2M paging on a Xeon Phi (in this figure McKernel's own 64-bit paging; Figure 6 uses "
    "Intel's MPSS Linux); Linux has no segmentation in 64-bit mode, so here the "
    "'segment' is the best paging can do: one contiguous region mapped with the biggest "
    "pages (1G pages are the closest to a segment: one TLB entry per GiB). This machine is a "
    "VM: every TLB miss walks the guest's page table and, for each of its levels, the "
    "host's (nested paging), so misses cost more than on bare metal and bigger pages help "
    "more. HPCC's four updates per table entry take minutes per run at 8 GiB here "
    "(~0.02 GUP/s), so a run does min(4 &times; entries, 2<sup>25</sup>) updates: the first "
    "positions of the official stream, verified the same way (64 MiB tables get the full "
    "count). Each configuration runs 3 times (twice at 4 and 8 GiB). Table sizes are measured "
    "coarse to fine (64 MiB, 8 GiB, 1 GiB, 128 MiB, 2 GiB, ...): sizes left once bench_gups's "
    "time budget (600 s) is spent, or that do not fit the free memory, are left out and "
    "listed under Runs. The 'THP segment' is a SEG_THP segment: 4K-granular, its data in a "
    "tmpfs that allows huge pages (as root the library mounts one with huge=within_size) "
    "and filled through a MADV_HUGEPAGE mapping (docs/hugepages.md); 2M and 1G segments get "
    "a hugetlbfs mount and pool pages from the library on demand, given back when the "
    "segment is deleted. The share of "
    "the table the kernel really mapped with huge pages is read from /proc/self/smaps and "
    "shown, so THP is never claimed where there was none.")

MEM_ORDER = ["seg4k", "anon", "thp", "seg2m", "seg1g"]
MEM_LABEL = {"seg4k": "4K segment", "anon": "anonymous 4K", "thp": "THP segment",
             "seg2m": "2M segment", "seg1g": "1G segment"}
MEM_COLOR = {"seg4k": "tab:blue", "anon": "tab:cyan", "thp": "tab:purple",
             "seg2m": "tab:orange", "seg1g": "tab:green"}
REAL_HUGE = 50.0  # % of a THP table in huge pages below which we say it ran on 4K pages


def huge_percent(entries, name, mem, key, value):
    """Median % of the memory in huge pages (the "<name>" lines), or None if not measured."""
    for e in entries:
        if e["name"] == name and e["params"].get("mem") == mem and e["params"].get(key) == value:
            return e["median"]
    return None


def mem_label(mem, huge):
    """A kind's name, saying so when THP did not get huge pages."""
    label = MEM_LABEL.get(mem, mem)
    if mem == "thp" and huge is not None and huge < REAL_HUGE:
        label += " (only %.0f%% huge: really 4K)" % huge
    return label


def baseline_of(entries, e):
    """The entry e's ratio was computed against (same name and its baseline_params)."""
    want = e.get("baseline_params")
    for b in entries:
        if b["name"] == e["baseline"] and b["params"] == want:
            return b
    return None


def speedup_range(entries, e):
    """(median, min, max) speedup of e over its baseline's median, or None."""
    if e.get("ratio") is None:
        return None
    b = baseline_of(entries, e)
    if b is None or not b["median"]:
        return (e["ratio"], e["ratio"], e["ratio"])
    return (e["ratio"], e["min"] / b["median"], e["max"] / b["median"])


def cell(e, speedup=None, unit=""):
    """'median [min-max] unit' and the speedup under it."""
    text = "%s %s" % (report.fmt_stat(e), esc(unit))
    if speedup is not None:
        text += "<br><b>%.2fx</b>" % speedup[0]
    return text


def plot_speedups(panels, xlabel, title, path, paper_points=(), xlog2=True):
    """panels: [(panel title, {mem: [(x, (median, min, max))]})]; one line per kind, the
    4K baseline at 1; paper_points: [(x, y, label, marker)] drawn on every panel."""
    plt = report.pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.8), squeeze=False)
    for ax, (ptitle, series) in zip(axes[0], panels):
        ax.axhline(1.0, color="tab:blue", linewidth=1, label=MEM_LABEL["seg4k"] + " (baseline)")
        for mem in MEM_ORDER:
            pts = sorted(series.get(mem, []))
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ys = [p[1][0] for p in pts]
            err = [[p[1][0] - p[1][1] for p in pts], [p[1][2] - p[1][0] for p in pts]]
            ax.errorbar(xs, ys, yerr=err, marker="o", markersize=4, capsize=2,
                        color=MEM_COLOR.get(mem, "gray"), label=series.get("_label", {}).get(
                            mem, MEM_LABEL.get(mem, mem)))
        for x, y, label, marker in paper_points:
            ax.plot([x], [y], marker, markersize=11, color="black", label=label)
        if xlog2:
            ax.set_xscale("log", base=2)
            xs = sorted({p[0] for s in series.values() if isinstance(s, list) for p in s} |
                        {p[0] for p in paper_points})
            if xs:
                ax.set_xticks(xs)
                ax.set_xticklabels([fmt_bytes(x).replace(" ", "") for x in xs], rotation=45)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("speedup over a 4K segment (median; bars = min..max)")
        ax.set_title(ptitle)
        ax.grid(True, alpha=0.4)
        if ax.has_data():
            ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def paper_2m_over_4k(papers, name, key, value):
    """Paper: 4K time / 2M time (= 2M's speedup over 4K) where both are given, else None."""
    t = {p["params"].get("page"): p["value"] for p in papers
         if p.get("name") == name and p.get("params", {}).get(key) == value}
    if "4K" in t and "2M" in t:
        return t["4K"] / t["2M"]
    return None


# ---------------------------------------------------------------------------------------

def gups_runs(entries, bounds):
    return [e for e in entries if e["name"] == "gups" and e["params"].get("bounds") == bounds]


def figure_runs(entries):
    """Unchecked runs at the figure's table sizes: those measured with 2 threads too (the
    extra sizes of the bounds-check measurement are 1 thread only)."""
    runs = gups_runs(entries, 0)
    sizes = {e["params"]["table_bytes"] for e in runs if e["params"].get("threads") == 2}
    return [e for e in runs if e["params"]["table_bytes"] in sizes]


def fig5_table(entries):
    runs = figure_runs(entries)
    keys = sorted({(e["params"]["table_bytes"], e["params"]["threads"]) for e in runs})
    mems = [m for m in MEM_ORDER if any(e["params"]["mem"] == m for e in runs)]
    rows = []
    for size, threads in keys:
        row = [fmt_bytes(size), threads]
        updates = None
        for mem in mems:
            e = next((e for e in runs if e["params"]["mem"] == mem and
                      e["params"]["table_bytes"] == size and e["params"]["threads"] == threads),
                     None)
            if e is None:
                row.append("-")
                continue
            updates = e["params"].get("updates")
            row.append(cell(e, speedup_range(entries, e), "GUP/s"))
        row.insert(2, "%s%s" % (fmt_num(updates), " (capped)" if updates and
                                updates < 4 * size // 8 else ""))
        rows.append(row)
    heads = ["table", "threads", "updates"]
    for mem in mems:
        huge = [e["median"] for e in entries if e["name"] == "gups_huge" and
                e["params"].get("mem") == mem]
        extra = ""
        if huge and mem != "seg4k" and mem != "anon":
            extra = "<br><small>huge pages: %.0f&ndash;%.0f%% of the table</small>" % (
                min(huge), max(huge))
        heads.append(esc(MEM_LABEL.get(mem, mem)) + extra)
    return table(heads, rows)


def bounds_rows(entries):
    """[(entry with the check, its unchecked baseline, cost in %)]."""
    out = []
    for e in gups_runs(entries, 1):
        b = baseline_of(entries, e)
        if b is not None and e["median"] > 0:
            out.append((e, b, (b["median"] / e["median"] - 1.0) * 100.0))
    out.sort(key=lambda t: (t[0]["params"]["table_bytes"], MEM_ORDER.index(t[0]["params"]["mem"])
                            if t[0]["params"]["mem"] in MEM_ORDER else 9))
    return out


def bounds_html(entries):
    rows = bounds_rows(entries)
    if not rows:
        return "<p><i>No bounds-check measurements.</i></p>"
    costs = [c for _, _, c in rows]
    body = table(["table", "memory", "updates", "unchecked GUP/s", "checked GUP/s",
                  "time per update, checked vs unchecked"],
                 [[fmt_bytes(e["params"]["table_bytes"]), esc(MEM_LABEL.get(e["params"]["mem"])),
                   fmt_num(e["params"].get("updates")), cell(b), cell(e),
                   "%+.1f%%" % c] for e, b, c in rows])
    return ("<h3>The cost of software segmentation</h3><p>The same update loop with an explicit "
            "base+bounds check on every table index (one unsigned compare and a branch, what "
            "a segment register checks in hardware for free), against none, one thread. "
            "Medians; positive = the check makes an update dearer. Range over these runs: "
            "%+.1f%% to %+.1f%%. Where a run waits for memory, the check hides in the miss; "
            "in a cache-resident table it is visible if anywhere.</p>%s"
            % (min(costs), max(costs), body))


def hpcc_html(entries):
    """Debian's hpcc beside our GUPS (4K anonymous memory, one thread, same table size)."""
    ours = [e for e in entries if e["program"] == "bench_hpcc" or e["name"].startswith("hpcc_")]
    if not ours:
        return ("<h3>Independent check: Debian's hpcc</h3><p><i>No hpcc measurement (see "
                "Runs: hpcc not installed or the run failed).</i></p>")
    rows, sentences = [], []
    for e in sorted(ours, key=lambda e: (e["params"].get("table_bytes", 0), e["name"])):
        b = baseline_of(entries, e) if e.get("baseline") else None
        ratio = e.get("ratio")
        rows.append([fmt_bytes(e["params"].get("table_bytes", 0)), esc(e["params"].get("variant", "")),
                     cell(e, unit="GUP/s"), "-" if b is None else cell(b, unit="GUP/s"),
                     "-" if ratio is None else "%.2f" % ratio])
        if ratio is not None and e["params"].get("variant") == "SingleRandomAccess":
            sentences.append("%s: hpcc %s GUP/s, ours %s GUP/s (hpcc / ours = %.2f, %s)" % (
                fmt_bytes(e["params"]["table_bytes"]), fmt_num(e["median"]),
                fmt_num(b["median"]) if b else "?", ratio,
                "within %.0f%%" % (abs(ratio - 1) * 100) if abs(ratio - 1) < 0.5
                else "%.1fx apart" % max(ratio, 1 / ratio)))
    text = ("Debian's hpcc 1.5.0 (one MPI process, its table sized through the HPL problem size "
            "N, in malloc'd 4K memory) against our single-thread GUPS in anonymous 4K memory at "
            "the same table size. hpcc always does 4 updates per entry; ours is capped as said "
            "above. " + ("; ".join(sentences) + "." if sentences else ""))
    return ("<h3>Independent check: Debian's hpcc</h3><p>%s</p>%s" % (text, table(
        ["table", "hpcc test", "hpcc", "ours (anon 4K, 1 thread)", "hpcc / ours"], rows)))


def render(entries, papers, out, plots):
    parts = []
    runs = figure_runs(entries)
    huge = {}
    for mem in MEM_ORDER:
        vals = [e["median"] for e in entries if e["name"] == "gups_huge" and e["params"].get("mem") == mem]
        huge[mem] = min(vals) if vals else None
    if huge.get("thp") is not None and huge["thp"] < REAL_HUGE:
        parts.append("<p><b>THP did not get huge pages here</b> (at least one table was only "
                     "%.0f%% huge-page mapped, read from /proc/self/smaps): the 'THP segment' "
                     "lines are 4K pages in disguise and are labelled so.</p>" % huge["thp"])
    p2 = paper_2m_over_4k(papers, "ra_time_vs_segmentation", "table_bytes", 1 << 31)
    seg_num = next((p for p in papers if p.get("name") == "ra_time_vs_segmentation" and
                    p["params"].get("page") == "4K" and p["params"].get("table_bytes") == 1 << 31),
                   None)
    seg = seg_num["value"] if seg_num else None
    if p2 is not None:
        t2m = seg / p2
        lo, hi = seg_num.get("range", [seg, seg])
        parts.append("<p>The paper at 2 GB (its baseline for this figure is McKernel's own 64-bit "
                     "paging, running the same assembly code): the gap between segmentation and "
                     "4K pages \"reaches almost 200%%\", which we read as 4K taking about %.1fx "
                     "segmentation's time; read as 200%% <i>of</i> segmentation's time it is "
                     "%.1fx. 2M paging takes about %.2fx. So 2M pages are %.1fx to %.1fx faster "
                     "than 4K there (black markers at %.1fx). Under 32 kB segmentation was 22%% "
                     "faster than 4K and 26%% faster than 2M pages (no TLB lookup at all); our "
                     "tables start at 64 MiB.</p>"
                     % (hi, lo, t2m, lo / t2m, hi / t2m, p2))
    if plots and runs:
        panels = []
        for threads in (1, 2):
            series = {"_label": {m: mem_label(m, huge.get(m)) for m in MEM_ORDER}}
            for e in runs:
                if e["params"]["threads"] != threads or e["params"]["mem"] == "seg4k":
                    continue
                s = speedup_range(entries, e)
                if s is not None:
                    series.setdefault(e["params"]["mem"], []).append((e["params"]["table_bytes"], s))
            panels.append(("%d thread%s" % (threads, "s" if threads > 1 else ""), series))
        points = []
        if p2 is not None:
            points = [(1 << 31, p2, "paper: 2M pages over 4K (2 GB)", "*"),
                      (1 << 31, seg, "paper: segmentation over 4K (2 GB)", "P")]
        plot_speedups(panels, "table size", TITLE, os.path.join(out, "fig5.png"), points)
        parts.append("<p><img src=\"fig5.png\" alt=\"%s\"></p>" % esc(TITLE))
    elif runs:
        parts.append("<p><i>No plot: python3-matplotlib is not installed.</i></p>")
    if runs:
        parts.append(fig5_table(entries))
    parts.append(bounds_html(entries))
    parts.append(hpcc_html(entries))
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------

def fake_entry(name, unit, value, params, baseline=None, baseline_params=None, ratio=None,
               program="bench_gups", spread=0.0):
    return {"program": program, "name": name, "unit": unit, "params": params, "median": value,
            "min": value * (1 - spread), "max": value * (1 + spread), "repeats": 3,
            "baseline": baseline, "baseline_params": baseline_params, "ratio": ratio,
            "cheaper": ratio, "note": None, "section": KEY}


def selftest(check):
    def p(mem, size, threads=1, bounds=0):
        return {"mem": mem, "table_bytes": size, "threads": threads, "updates": 1 << 25,
                "bounds": bounds}
    g = 1 << 30
    es = [fake_entry("gups", "GUP/s", 0.02, p("seg4k", g)),
          fake_entry("gups", "GUP/s", 0.02, p("seg4k", g, threads=2)),
          fake_entry("gups", "GUP/s", 0.5, p("seg4k", 1 << 18)),
          fake_entry("gups", "GUP/s", 0.05, p("seg2m", g), "gups", p("seg4k", g), 2.5, spread=0.1),
          fake_entry("gups", "GUP/s", 0.021, p("thp", g), "gups", p("seg4k", g), 1.05),
          fake_entry("gups_huge", "%", 3.0, {"mem": "thp", "table_bytes": g}),
          fake_entry("gups", "GUP/s", 0.04, p("seg4k", g, bounds=1), "gups", p("seg4k", g), 2.0),
          fake_entry("hpcc_gups", "GUP/s", 0.022, {"table_bytes": g,
                     "variant": "SingleRandomAccess"}, "gups", p("anon", g), 1.1,
                     program="bench_hpcc"),
          fake_entry("gups", "GUP/s", 0.02, p("anon", g), "gups", p("seg4k", g), 1.0)]
    papers = [{"name": "ra_time_vs_segmentation", "params": {"page": "4K", "table_bytes": 1 << 31},
               "value": 3.0}, {"name": "ra_time_vs_segmentation",
                               "params": {"page": "2M", "table_bytes": 1 << 31}, "value": 1.5}]
    check(abs(paper_2m_over_4k(papers, "ra_time_vs_segmentation", "table_bytes", 1 << 31) - 2.0)
          < 1e-9, "fig5: paper 2M over 4K = 4K time / 2M time")
    s = speedup_range(es, next(e for e in es if e["params"]["mem"] == "seg2m"))
    check(abs(s[1] - 0.045 / 0.02) < 1e-9 and abs(s[2] - 0.055 / 0.02) < 1e-9,
          "fig5: speedup range from min/max over the baseline median")
    rows = bounds_rows(es)
    check(len(rows) == 1 and abs(rows[0][2] - (-50.0)) < 1e-9,
          "fig5: a checked run twice as fast costs -50%% (got %r)" % ([r[2] for r in rows],))
    tmp = tempfile.mkdtemp(prefix="exomem-fig5-selftest-")
    try:
        html = render(es, papers, tmp, report.can_plot())
        check("2.50x" in html, "fig5: the 2M speedup is in the table")
        check("only 3% huge: really 4K" in html or "only 3%" in html,
              "fig5: THP without huge pages is labelled so")
        check("hpcc / ours = 1.10" in html and "within 10%" in html, "fig5: the hpcc sentence")
        check("-50.0%" in html, "fig5: the bounds-check cost is shown")
        check("capped" in html, "fig5: a 1 GiB table with 2^25 updates is marked capped")
        check("256 KiB</td><td>1</td>" not in html,
              "fig5: a bounds-check-only size stays out of the figure's table")
        if report.can_plot():
            check(os.path.exists(os.path.join(tmp, "fig5.png")), "fig5: plot written")
        check("No gups" not in render([], papers, tmp, False), "fig5: renders with no entries")
        ranged = [dict(papers[0], range=[2.0, 3.0]), papers[1]]
        check("2M pages are 1.3x to 2.0x faster" in render([], ranged, tmp, False),
              "fig5: 'almost 200%' gives a range, not one reading")
    finally:
        for f in os.listdir(tmp):
            os.remove(os.path.join(tmp, f))
        os.rmdir(tmp)
