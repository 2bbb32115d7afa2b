"""The in-segment allocator (seg_malloc/seg_free) against glibc malloc, jemalloc and mimalloc
on one mixed-size workload with 1, 2 and 4 threads (bench/bench_alloc.c)."""
import os

import report
from report import esc, fmt_num, table

KEY = "alloc"
TITLE = "Allocator: seg_malloc against glibc, jemalloc and mimalloc"
ORDER = 5   # right after the built-in sections
PROGRAMS = ["bench_alloc"]
TIMEOUT = 600

INTRO = (
    "Each thread keeps a working set and, at each step, frees a random object and allocates "
    "a new one in its place; sizes uniform in 16 B&ndash;4 KiB, 1% up to 64 KiB; the same "
    "size and slot sequences for every allocator. <b>seg_malloc</b>: the public calls in a "
    "switched-in segment (view lookup without a lock, per-thread caches of freed chunks); "
    "<b>heap direct</b>: the in-segment heap called without the view and without the caches "
    "(every call takes the heap's process-shared mutex); <b>jemalloc</b> and <b>mimalloc</b>: "
    "Debian's libraries loaded with dlopen. All run in the same process, one allocator after "
    "another in each round. Shown: million operations (a malloc or a free) per second over "
    "all threads, as a ratio to glibc malloc with the same number of threads (above 1: "
    "faster than glibc). The machine has 2 cores, so 4 threads share them.")

ALLOCATORS = [("alloc_seg_malloc", "seg_malloc"), ("alloc_heap_direct", "heap direct"),
              ("alloc_jemalloc", "jemalloc"), ("alloc_mimalloc", "mimalloc"),
              ("alloc_glibc_malloc", "glibc malloc")]
TARGET = "seg_malloc >= 1.0x glibc single and multi-threaded"


def find(entries, name, threads):
    for e in entries:
        if e["name"] == name and e["params"].get("threads") == threads:
            return e
    return None


def thread_counts(entries):
    return sorted({e["params"].get("threads") for e in entries
                   if isinstance(e["params"].get("threads"), int)})


def cell(e):
    if e is None:
        return "-"
    ratio = " (%sx)" % fmt_num(e["ratio"]) if e.get("ratio") is not None else ""
    return "%s [%s..%s]%s" % (fmt_num(e["median"]), fmt_num(e["min"]), fmt_num(e["max"]), ratio)


def plot(entries, path):
    plt = report.pyplot()
    counts = thread_counts(entries)
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(ALLOCATORS)
    for i, (name, label) in enumerate(ALLOCATORS):
        xs, ys = [], []
        for j, t in enumerate(counts):
            e = find(entries, name, t)
            ratio = 1.0 if name == "alloc_glibc_malloc" and e else (e or {}).get("ratio")
            if ratio is not None:
                xs.append(j + (i - len(ALLOCATORS) / 2 + 0.5) * width)
                ys.append(ratio)
        ax.bar(xs, ys, width, label=label)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(counts)))
    ax.set_xticklabels(["%d thread%s" % (t, "" if t == 1 else "s") for t in counts])
    ax.set_ylabel("throughput / glibc malloc (median)")
    ax.set_yscale("log")
    from matplotlib.ticker import FormatStrFormatter
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.4)
    ax.set_title("Mixed-size malloc/free, ratio to glibc (higher is faster)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def render(entries, papers, out, plots):
    counts = thread_counts(entries)
    if not counts:
        return report.generic_table(entries)
    rows = [[esc(label)] + [cell(find(entries, name, t)) for t in counts]
            for name, label in ALLOCATORS]
    html = [table(["allocator"] + ["%d thread%s: Mops/s [min..max] (x glibc)" %
                                   (t, "" if t == 1 else "s") for t in counts], rows)]
    if plots:
        plot(entries, os.path.join(out, "alloc.png"))
        html.append('<p><img src="alloc.png" alt="allocator ratios to glibc"></p>')
    return "\n".join(html)


def targets(entries):
    counts = thread_counts(entries)
    seg = [(t, find(entries, "alloc_seg_malloc", t)) for t in counts]
    seg = [(t, e) for t, e in seg if e is not None and e.get("ratio") is not None]
    if not seg or 1 not in [t for t, _ in seg] or len(seg) < 2:
        return [{"target": TARGET, "verdict": "no data", "detail": ""}]
    low = [(t, e) for t, e in seg if e["ratio"] < 1.0]
    detail = ", ".join("%d thread%s %sx" % (t, "" if t == 1 else "s", fmt_num(e["ratio"]))
                       for t, e in seg)
    return [{"target": TARGET, "verdict": "not met" if low else "met", "detail": esc(detail)}]


def selftest(check):
    def entry(name, threads, median, ratio):
        return {"name": name, "unit": "Mops/s", "params": {"threads": threads},
                "median": median, "min": median, "max": median, "ratio": ratio,
                "program": "bench_alloc"}
    e = [entry("alloc_glibc_malloc", 1, 10.0, None), entry("alloc_seg_malloc", 1, 12.0, 1.2),
         entry("alloc_glibc_malloc", 2, 20.0, None), entry("alloc_seg_malloc", 2, 18.0, 0.9)]
    check(targets(e)[0]["verdict"] == "not met", "alloc: a multi-threaded ratio below 1 fails")
    e[3] = entry("alloc_seg_malloc", 2, 30.0, 1.5)
    check(targets(e)[0]["verdict"] == "met", "alloc: every ratio >= 1 meets the target")
    check(targets(e[:2])[0]["verdict"] == "no data", "alloc: single-threaded alone is no data")
    html = render(e, [], None, False)
    check("12 [12..12] (1.200x)" in html and "2 threads" in html, "alloc renders its table")
