"""Report section: CARAT (PLDI 2020), compiler- and runtime-based address translation:
multi-region guards (Figure 4) and the cost of moving a live allocation (Table 3)."""
import os

import report
from report import by_name, esc, fmt_bytes, fmt_num, table

KEY = "carat"
TITLE = "CARAT: guards and moves of live memory (Figure 4, Table 3)"
ORDER = 400
PROGRAMS = ["bench_carat_guards", "bench_carat_move"]
PAPER_PLACES = [("carat", "Table 3"), ("carat", "Figure 4")]
TIMEOUT = 600

INTRO = (
    "A clang-19 pass plugin (llvm/, used through exomem-cc) reports every allocation and "
    "every pointer stored to memory to exomem's CARAT runtime and guards loads, stores and "
    "calls; the runtime moves live allocations by stopping every thread and patching each "
    "escaped pointer, register and stack word that points into them (docs/carat.md). "
    "<b>Measured here:</b> what a guard costs against the number of protection "
    "regions, by binary search in the runtime's array and by an if-tree laid out at compile "
    "time, on random and strided addresses (Figure 4), and the time of each step of a move "
    "for allocations of 64 B to 1 MiB with 1 to 10,000 escapes, with 0, 1 and 3 other "
    "threads spinning (Table 3). The evaluation on real programs (Table 1, Figures 3, 5, "
    "6, 7, 9, Table 2, AddressSanitizer as the peer) is the next section. The paper moves "
    "pages on physical memory; we move whole allocations between heap blocks under the "
    "kernel's paging, so there is no 'page expand' step.")


def guard_rows(entries):
    rows = []
    for pattern in ("random", "strided"):
        inline = [e for e in by_name(entries, "carat_guard_inline")
                  if e["params"].get("pattern") == pattern]
        for e in sorted((e for e in entries if e["name"] in ("carat_guard_binary",
                                                              "carat_guard_iftree")
                         and e["params"].get("pattern") == pattern),
                        key=lambda e: (e["params"]["regions"], e["name"])):
            rows.append([pattern, e["params"]["regions"], e["name"].split("_")[-1],
                         report.fmt_stat(e), fmt_num(e.get("ratio"))])
        for e in inline:
            rows.append([pattern, 1, "inline (one region)", report.fmt_stat(e), "1"])
    return rows


def plot_guards(entries, path):
    plt = report.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, pattern in zip(axes, ("random", "strided")):
        for name, label in (("carat_guard_binary", "binary search"),
                            ("carat_guard_iftree", "if-tree")):
            pts = sorted((e["params"]["regions"], e["median"]) for e in by_name(entries, name)
                         if e["params"].get("pattern") == pattern)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        inline = [e["median"] for e in by_name(entries, "carat_guard_inline")
                  if e["params"].get("pattern") == pattern]
        if inline:
            ax.axhline(inline[0], color="gray", linestyle="--", label="one region, inline")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("protection regions")
        ax.set_title("%s addresses" % pattern)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("ns per guard")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


STEPS = ["stop", "find", "patch_escapes", "patch_registers", "copy", "resume", "total"]


def move_rows(entries):
    configs = sorted({(e["params"]["bytes"], e["params"]["escapes"], e["params"]["threads"])
                      for e in entries if e["name"].startswith("carat_move_")})
    rows = []
    for b, esc_, t in configs:
        cells = [fmt_bytes(b), esc_, t]
        for s in STEPS:
            e = next((e for e in by_name(entries, "carat_move_" + s)
                      if (e["params"]["bytes"], e["params"]["escapes"],
                          e["params"]["threads"]) == (b, esc_, t)), None)
            cells.append(fmt_num(e["median"]) if e else "-")
        rows.append(cells)
    return rows


def paper_move_row(papers):
    want = {"move_page_expand": "page expand", "move_patch": "patch",
            "move_register_patch": "registers", "move_alloc_and_move": "alloc + copy",
            "move_total": "total"}
    got = {n["name"]: n for n in papers if n.get("paper") == "carat" and n["name"] in want}
    return ", ".join("%s %s us (%s cycles)" % (want[k], fmt_num(got[k]["us"]),
                                                fmt_num(got[k]["value"]))
                     for k in want if k in got)


def render(entries, papers, out, plots):
    parts = []
    if by_name(entries, "carat_guard_binary"):
        parts.append("<h3>Figure 4: multi-region guards</h3>")
        parts.append("<p>ns per guard (median [min&ndash;max] of the repeats), ratio to the "
                     "one-region inline check on the same addresses. The paper's Figure 4 "
                     "shows the same two methods; its text gives no numbers.</p>")
        if plots:
            plot_guards(entries, os.path.join(out, "carat_fig4.png"))
        parts.append('<img src="carat_fig4.png" alt="guard cost against regions">')
        parts.append(table(["addresses", "regions", "method", "ns per guard", "x inline"],
                           guard_rows(entries)))
    if any(e["name"].startswith("carat_move_") for e in entries):
        parts.append("<h3>Table 3: the cost of a move, step by step</h3>")
        parts.append("<p>Medians in &micro;s. 'find' includes reading /proc/self/maps (the "
                     "writable mappings that escape slots are checked against); 'patch "
                     "registers' includes the conservative scan of the stopped threads' "
                     "stacks. Paper, geometric mean of its 22 benchmarks (2.3 GHz): %s.</p>"
                     % esc(paper_move_row(papers)))
        parts.append(table(["bytes", "escapes", "other threads"] + STEPS, move_rows(entries)))
    return "\n".join(parts)


def targets(entries):
    out = []
    bins = [e for e in by_name(entries, "carat_guard_binary") if e["params"]["regions"] >= 64]
    trees = {(e["params"]["regions"], e["params"]["pattern"]): e["median"]
             for e in by_name(entries, "carat_guard_iftree")}
    if bins:
        slower = [e for e in bins
                  if trees.get((e["params"]["regions"], e["params"]["pattern"]), 0) > e["median"]]
        out.append({"target": "if-tree guards at least as fast as binary search from 64 "
                              "regions (the paper's Figure 4 shape)",
                    "verdict": "met" if not slower else "not met",
                    "detail": "%d of %d configurations slower" % (len(slower), len(bins))})
    else:
        out.append({"target": "if-tree guards at least as fast as binary search from 64 regions",
                    "verdict": "no data", "detail": "bench_carat_guards did not run"})
    return out


def selftest(check):
    e = lambda n, v, **p: {"name": n, "median": v, "min": v, "max": v, "params": p,
                           "ratio": None}
    ents = [e("carat_guard_inline", 0.5, regions=1, pattern="random"),
            e("carat_guard_binary", 30, regions=64, pattern="random"),
            e("carat_guard_iftree", 10, regions=64, pattern="random"),
            e("carat_move_total", 100, bytes=64, escapes=1, threads=0)]
    check(targets(ents)[0]["verdict"] == "met", "carat: if-tree target")
    check(len(move_rows(ents)) == 1, "carat: one move configuration")
    check("carat_fig4.png" in render(ents, [], "/nonexistent", False), "carat: render")
