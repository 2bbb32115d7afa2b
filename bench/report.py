"""HTML page and PNG plots for bench/run.py: machine facts, one section per figure or table
of the paper (our numbers beside the paper's), the Table 2 targets, and how each program ran.
"""
import html
import os

# Seconds per time unit; measurements in these units can be compared and converted.
TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
PAGE_ORDER = {"4K": 0, "2M": 1, "1G": 2}
PAGE_COLOR = {"4K": "tab:blue", "2M": "tab:orange", "1G": "tab:green"}
BACKING_STYLE = {"anon": "-", "shm": "--"}

SECTION_INTRO = {
    "fig1": "mmap(MAP_POPULATE) and munmap of one mapping as it grows. <b>anon</b>: anonymous "
            "memory (4K) or MAP_HUGETLB (2M/1G), so populating also allocates and zeroes every "
            "page. <b>shm</b>: MAP_SHARED of a memfd whose pages exist already, so only page "
            "tables are built: this is what the paper's Figure 1 measures ('does not include "
            "page zeroing costs'). The paper has 4 KiB numbers only.",
    "table2": "What one vas_switch costs here (per switch, A&rarr;B&rarr;A loops), next to what "
              "it replaces (mmap+populate+munmap of the same segments) and a process context "
              "switch (pipe ping-pong, round trip / 2). The paper's Table 2 is in cycles on a "
              "2.5 GHz Xeon; shown converted to microseconds.",
    "lock": "Lockable segments: cost of taking and releasing a segment lock.",
    "other": "Measurements from programs or names the report has no section for.",
}


def esc(s):
    return html.escape(str(s), quote=True)


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend, imported when first plotting so that
    run.py's arithmetic works without matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def by_name(entries, name):
    """The entries of one measurement name."""
    return [e for e in entries if e["name"] == name]


def distinct_param(entries, key):
    """The values of params[key] across entries, in order of first appearance."""
    seen = []
    for e in entries:
        v = e["params"].get(key)
        if v and v not in seen:
            seen.append(v)
    return seen


def test_entry(name, median, params, unit, program, section):
    """An aggregated entry as run.py makes them, for the sections' selftests."""
    return {"name": name, "unit": unit, "median": median, "min": median, "max": median,
            "repeats": 1, "params": params, "program": program, "section": section}


def fmt_num(v):
    if v is None:
        return "-"
    a = abs(v)
    if v == int(v) and a < 1e6:
        return "%d" % v
    if a >= 1000:
        return "%.0f" % v
    if a >= 10:
        return "%.1f" % v
    if a >= 0.1:
        return "%.3f" % v
    return "%.4g" % v


def fmt_bytes(n):
    n = int(n)
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return "%d %s" % (n // size, unit)
    return "%d B" % n


def fmt_params(params):
    parts = []
    for k in sorted(params):
        v = params[k]
        if k.endswith("bytes") and isinstance(v, int):
            v = fmt_bytes(v)
        parts.append("%s=%s" % (k, v))
    return " ".join(parts)


def fmt_stat(e):
    return "%s [%s&ndash;%s]" % (fmt_num(e["median"]), fmt_num(e["min"]), fmt_num(e["max"]))


def convert(value, unit, target):
    """value in unit expressed in target (time units only), or None if not convertible."""
    if unit == target:
        return value
    if unit in TIME_UNITS and target in TIME_UNITS:
        return value * TIME_UNITS[unit] / TIME_UNITS[target]
    return None


def table(headers, rows):
    out = ["<table><tr>%s</tr>" % "".join("<th>%s</th>" % h for h in headers)]
    for row in rows:
        out.append("<tr>%s</tr>" % "".join("<td>%s</td>" % c for c in row))
    out.append("</table>")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------
# plots

def plot_fig1(entries, papers, path):
    """Log-log: time against mapping size, build and removal side by side, paper points."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharey=True)
    for ax, name, title in ((axes[0], "pt_build", "build: mmap + MAP_POPULATE"),
                            (axes[1], "pt_remove", "remove: munmap")):
        series = {}
        for e in entries:
            if e["name"] == name and "bytes" in e["params"]:
                key = (e["params"].get("page", "?"), e["params"].get("backing", "?"))
                series.setdefault(key, []).append(e)
        for (page, backing), es in sorted(series.items(),
                                          key=lambda kv: (PAGE_ORDER.get(kv[0][0], 9), kv[0][1])):
            es.sort(key=lambda e: e["params"]["bytes"])
            x = [e["params"]["bytes"] for e in es]
            y = [convert(e["median"], e["unit"], "ms") for e in es]
            lo = [yi - convert(e["min"], e["unit"], "ms") for yi, e in zip(y, es)]
            hi = [convert(e["max"], e["unit"], "ms") - yi for yi, e in zip(y, es)]
            ax.errorbar(x, y, yerr=[lo, hi], color=PAGE_COLOR.get(page, "gray"),
                        linestyle=BACKING_STYLE.get(backing, ":"), marker="o", markersize=3,
                        capsize=2, label="%s pages, %s" % (page, backing))
        pts = [p for p in papers if p.get("name") == name and "bytes" in p.get("params", {})]
        if pts:
            ax.plot([p["params"]["bytes"] for p in pts],
                    [convert(p["value"], p["unit"], "ms") for p in pts], "k*", markersize=12,
                    label="paper (Linux, 4K, no zeroing)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel("mapping size")
        ax.grid(True, which="major", alpha=0.4)
        ticks = [1 << s for s in range(20, 37, 2)]
        ax.set_xticks(ticks)
        ax.set_xticklabels([fmt_bytes(t).replace(" ", "") for t in ticks])
        if ax.has_data():
            ax.legend(fontsize=8)
    axes[0].set_ylabel("time (ms, median; bars = min..max)")
    fig.suptitle("Figure 1 redone: page-table build and removal cost")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_bars(entries, papers, path, title):
    """Horizontal bars (log scale) of each entry's median with min..max; time units are all
    shown in microseconds, other units get a panel each. Paper numbers in gray."""
    panels = {}
    seen = {}
    for e in entries:  # the same measurement from two programs: say which is which
        seen.setdefault((e["name"], fmt_params(e["params"])), set()).add(e["program"])
    for e in entries:
        unit = "us" if e["unit"] in TIME_UNITS else e["unit"]
        label = "%s %s" % (e["name"], fmt_params(e["params"]))
        if len(seen[(e["name"], fmt_params(e["params"]))]) > 1:
            label += " [%s]" % e["program"]
        panels.setdefault(unit, []).append((label, [convert(e[k], e["unit"], unit)
                                                    if unit == "us" else e[k]
                                                    for k in ("median", "min", "max")], False))
    for p in papers:
        if "us" in p:
            label = "paper: %s %s" % (p["name"], fmt_params(p.get("params", {})))
            panels.setdefault("us", []).append((label, [p["us"]] * 3, True))
    if not panels:
        panels["us"] = []
    plt = pyplot()
    n_bars = max(len(v) for v in panels.values())
    fig, axes = plt.subplots(len(panels), 1, squeeze=False,
                             figsize=(10, 1.5 + 0.32 * max(n_bars, 1) * len(panels)))
    for ax, (unit, bars) in zip(axes[:, 0], sorted(panels.items())):
        if not bars:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
            continue
        ys = list(range(len(bars)))
        med = [b[1][0] for b in bars]
        err = [[b[1][0] - b[1][1] for b in bars], [b[1][2] - b[1][0] for b in bars]]
        ax.barh(ys, med, xerr=err, capsize=2,
                color=["0.7" if b[2] else "tab:blue" for b in bars])
        for y, b in zip(ys, bars):  # the number right of the whisker, clear of it
            ax.annotate(" " + fmt_num(b[1][0]), (max(b[1]), y), va="center", fontsize=7)
        ax.set_yticks(ys)
        ax.set_yticklabels([b[0] for b in bars], fontsize=8)
        ax.invert_yaxis()
        if min(med) > 0 and max(med) / min(med) > 20:  # log only where it is needed
            ax.set_xscale("log")
        ax.set_xlabel("%s (median; bars = min..max)" % unit)
        ax.grid(True, axis="x", alpha=0.4)
    axes[0, 0].set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------------------------------
# tables

def generic_table(entries):
    rows = []
    for e in entries:
        ratio = "-"
        if e["ratio"] is not None:
            ratio = "%s (%s)" % (fmt_num(e["ratio"]), "%sx cheaper" % fmt_num(e["cheaper"])
                                 if e["cheaper"] >= 1 else "%sx dearer" % fmt_num(1 / e["cheaper"]))
        rows.append([esc(e["name"]), esc(fmt_params(e["params"])),
                     "%s %s" % (fmt_stat(e), esc(e["unit"])), e["repeats"],
                     esc(e["baseline"] or "-"), ratio, esc(e["program"])])
    return table(["name", "params", "median [min&ndash;max]", "repeats", "baseline",
                  "median / baseline median (as cost)", "program"], rows)


def fig1_table(entries, papers):
    """One row per (page, backing, size): build and removal side by side, paper beside."""
    cells = {}
    for e in entries:
        p = e["params"]
        if e["name"] in ("pt_build", "pt_remove") and "bytes" in p:
            cells.setdefault((p.get("page", "?"), p.get("backing", "?"), p["bytes"]), {})[e["name"]] = e
    paper_at = {(p["params"].get("page"), p["params"]["bytes"]): p for p in papers
                if p.get("name") == "pt_build" and "bytes" in p.get("params", {})}
    rows = []
    for key in sorted(cells, key=lambda k: (PAGE_ORDER.get(k[0], 9), k[1], k[2])):
        page, backing, size = key
        c = cells[key]
        cols = [esc(page), esc(backing), fmt_bytes(size)]
        for name in ("pt_build", "pt_remove"):
            e = c.get(name)
            cols.append("-" if e is None else "%s %s" % (fmt_stat(e), esc(e["unit"])))
        cols.append(max(e["repeats"] for e in c.values()))
        pp = paper_at.get((page, size))
        cols.append("-" if pp is None else "about %s %s" % (fmt_num(pp["value"]), esc(pp["unit"])))
        rows.append(cols)
    unmatched = [p for k, p in sorted(paper_at.items(), key=lambda kv: kv[0][1])
                 if not any((k[0], k[1]) == (c[0], c[2]) for c in cells)]
    note = ""
    if unmatched:
        note = "<p>Paper numbers at sizes not measured here: %s.</p>" % "; ".join(
            "%s pages, %s: about %s %s" % (esc(p["params"].get("page")),
                                           fmt_bytes(p["params"]["bytes"]), fmt_num(p["value"]),
                                           esc(p["unit"])) for p in unmatched)
    if not rows:
        return note
    return table(["page", "backing", "size", "build (mmap+populate) median [min&ndash;max]",
                  "remove (munmap) median [min&ndash;max]", "repeats",
                  "paper build (no zeroing)"], rows) + note


def paper_table(papers):
    rows = []
    for p in papers:
        conv = "%s us" % fmt_num(p["us"]) if "us" in p else ""
        rows.append([esc(p.get("where", "")), esc(p.get("what", p.get("name", ""))),
                     esc(fmt_params(p.get("params", {}))),
                     "%s %s" % (fmt_num(p["value"]), esc(p["unit"])), conv,
                     esc(p.get("approximate", ""))])
    return table(["where", "what", "params", "paper's value", "converted", "caveat"], rows)


def targets_html(targets):
    items = []
    for t in targets:
        cls = {"met": "met", "not met": "notmet"}.get(t["verdict"], "nodata")
        items.append("<li><b>%s</b>: <span class=\"%s\">%s</span><br><small>%s</small></li>"
                     % (esc(t["target"]), cls, esc(t["verdict"].upper()), esc(t["detail"])))
    return "<div class=\"targets\"><h3>Targets</h3><ul>%s</ul></div>" % "".join(items)


def machine_html(machine):
    rows = []
    for k, v in machine.items():
        if isinstance(v, dict):
            v = ", ".join("%s: %s" % (kk, fmt_pool(vv)) for kk, vv in v.items())
        elif isinstance(v, list):
            v = ", ".join(map(str, v))
        rows.append(["<b>%s</b>" % esc(k), esc(v)])
    return table(["fact", "value"], rows)


def fmt_pool(v):
    if isinstance(v, dict):
        return "/".join("%s %s" % (k, x) for k, x in v.items())
    return str(v)


def runs_html(runs):
    out = []
    for r in runs:
        when = ", started %s" % r["started"] if r.get("started") else ""
        if r.get("args"):
            when += ", with %s" % " ".join(r["args"])
        out.append("<h3>%s: %s (%.0f s%s)</h3>" % (esc(r["program"]), esc(r["status"]),
                                                   float(r["seconds"] or 0), esc(when)))
        if r["skips"]:
            out.append("<p>Not measured:</p><ul>%s</ul>" % "".join(
                "<li>%s: %s</li>" % (esc(fmt_params(s["params"])), esc(s["reason"]))
                for s in r["skips"]))
        if r["stderr"]:
            lines = r["stderr"].splitlines()
            shown = lines[-200:]
            more = "" if len(lines) <= 200 else "(last 200 of %d lines)\n" % len(lines)
            out.append("<details><summary>stderr</summary><pre>%s%s</pre></details>"
                       % (esc(more), esc("\n".join(shown))))
    return "\n".join(out)


CSS = """
body { font-family: sans-serif; max-width: 1200px; margin: 1em auto; padding: 0 1em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 90%; }
th, td { border: 1px solid #bbb; padding: 2px 8px; text-align: left; }
th { background: #eee; }
img { max-width: 100%; border: 1px solid #ddd; }
.met { color: #070; font-weight: bold; } .notmet { color: #b00; font-weight: bold; }
.nodata { color: #777; font-weight: bold; }
.targets { background: #f6f6f6; border: 1px solid #ccc; padding: 0 1em; margin: 1em 0; }
pre { background: #f6f6f6; padding: 0.5em; overflow-x: auto; font-size: 85%; }
"""


def can_plot():
    try:
        pyplot()
        return True
    except ImportError:
        return False


def write_html(out, machine, entries, runs, targets, papers, sections, renderers=None):
    """Write out/index.html and one PNG per section (tables only if matplotlib is missing).
    renderers: {section key: render(entries, papers, out, plots) -> html} for sections that
    draw themselves (bench/sections/*.py); the others get a table and a bar plot."""
    renderers = renderers or {}
    plots = can_plot()
    parts = ["<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>exomem benchmark "
             "report</title><style>%s</style></head><body>" % CSS,
             "<h1>exomem benchmark report</h1>", "<h2>Machine</h2>", machine_html(machine)]
    for key, title in sections:
        mine = [e for e in entries if e["section"] == key]
        theirs = [p for p in papers if p["section"] == key]
        if key == "other" and not mine:
            continue
        parts.append("<h2>%s</h2>" % esc(title))
        parts.append("<p>%s</p>" % SECTION_INTRO.get(key, ""))
        own_targets = [t for t in targets if t.get("section", "table2") == key]
        if own_targets:
            parts.append(targets_html(own_targets))
        if not mine:
            parts.append("<p><i>No measurements (see Runs below for why).</i></p>")
        png = "%s.png" % key
        if key in renderers:
            parts.append(renderers[key](mine, theirs, out, plots))
            if theirs:
                parts.append("<h3>The paper's numbers</h3>" + paper_table(theirs))
            continue
        if key == "fig1":
            if plots:
                plot_fig1(mine, theirs, os.path.join(out, png))
            rest = [e for e in mine if e["name"] not in ("pt_build", "pt_remove")]
            parts.append(fig1_table(mine, theirs))
            if rest:
                parts.append(generic_table(rest))
        else:
            if plots:
                plot_bars(mine, theirs, os.path.join(out, png), title)
            if mine:
                parts.append(generic_table(mine))
        if plots:
            parts.append("<p><img src=\"%s\" alt=\"%s\"></p>" % (png, esc(title)))
        else:
            parts.append("<p><i>No plot: python3-matplotlib is not installed.</i></p>")
        if theirs:
            parts.append("<h3>The paper's numbers</h3>" + paper_table(theirs))
    parts.append("<h2>Runs</h2>")
    parts.append(runs_html(runs))
    parts.append("</body></html>")
    with open(os.path.join(out, "index.html"), "w") as f:
        f.write("\n".join(parts))
