"""The application-level pager (AVM on Linux, docs/pager.md) against the kernel's own paging on
data larger than the memory budget (bench/bench_pager.c)."""
import os

import report
from report import esc, fmt_num, table

KEY = "pager"
TITLE = "Application-level pager against the kernel’s paging (AVM)"
ORDER = 70
PROGRAMS = ["bench_pager", "bench_pager_store"]
TIMEOUT = 2400

INTRO = (
    "Four workloads on data larger than the memory budget, the same code on both sides: "
    "<b>uniform</b> random 8-byte words (one in four written), <b>zipf</b> the same over "
    "pages drawn from Zipf(0.99) with hot pages scattered, <b>scan</b> a cyclic sequential "
    "scan of 1.5&times; the budget, <b>chase</b> pointer chasing (8 dependent hops per "
    "lookup through 64-byte nodes). Data is 2&times; and 4&times; the budget, written once "
    "before the timed operations. <b>exomem</b>: a pager region with a frame budget, every "
    "policy with the file store (in a memory cgroup of the budget + 4 MiB, so that the "
    "file's page cache cannot serve as extra memory) and the lz4/zstd memory stores (their "
    "compressed copies live outside any limit, as zram's do), handler-thread delivery, and "
    "SIGBUS delivery for LRU; with LRU only, the zstd store, the io_uring file store, a "
    "redis-server on a UNIX socket and a 3-node Redis Cluster on loopback TCP, both started "
    "by this run. <b>kernel</b>: the same program on anonymous memory in a "
    "memory cgroup of the budget + 4 MiB (v1 <code>memory.limit_in_bytes</code> here), with "
    "swap on zram (lz4) or on a swap file on the same disk as the file store. Shown: "
    "operations per second as a ratio to the kernel with zram (above 1: exomem is faster), "
    "the fault service time of each store and delivery, and the cost of the three page-table "
    "structures. Each configuration runs in a forked child; medians over the repeats.")

WORKLOADS = ["uniform", "zipf", "scan", "chase"]


def ops_entries(entries):
    return [e for e in entries if e["name"] == "pager_ops"]


def find_ops(entries, workload, data_x, peer, store, delivery):
    for e in ops_entries(entries):
        p = e["params"]
        if (p.get("workload"), p.get("data_x"), p.get("peer"), p.get("store"),
                p.get("delivery")) == (workload, data_x, peer, store, delivery):
            return e
    return None


def kernel_zram(entries, workload, data_x):
    return find_ops(entries, workload, data_x, "kernel-zram", "zram", "kernel")


def ratio(e, entries):
    """e's throughput over the kernel-on-zram run of the same workload and size."""
    if e is None:
        return None
    k = kernel_zram(entries, e["params"]["workload"], e["params"]["data_x"])
    if k is None or not k["median"]:
        return None
    return e["median"] / k["median"]


def columns(entries):
    cols = []
    for w in WORKLOADS:
        for x in sorted({e["params"]["data_x"] for e in ops_entries(entries)
                         if e["params"]["workload"] == w}):
            cols.append((w, x))
    return cols


def row_keys(entries):
    keys = []
    for e in ops_entries(entries):
        p = e["params"]
        k = (p["peer"], p["store"], p["delivery"])
        if k not in keys:
            keys.append(k)
    return keys


def ratio_table(entries):
    cols = columns(entries)
    rows = []
    for peer, store, delivery in row_keys(entries):
        row = [esc(peer), esc(store), esc(delivery)]
        for w, x in cols:
            e = find_ops(entries, w, x, peer, store, delivery)
            r = ratio(e, entries)
            if e is None:
                row.append("&ndash;")
            elif peer == "kernel-zram":
                row.append("%s kops/s" % fmt_num(e["median"]))
            else:
                row.append("%.2fx" % r if r is not None else fmt_num(e["median"]))
        rows.append(row)
    heads = ["peer", "store", "delivery"] + ["%s %sx" % (w, fmt_num(x)) for w, x in cols]
    return table(heads, rows)


def latency_table(entries):
    rows = []
    med = [e for e in entries if e["name"] == "pager_fault_us"]
    for e in med:
        p = e["params"]
        p99 = next((f for f in entries if f["name"] == "pager_fault_us_p99" and
                    all(f["params"].get(k) == v for k, v in p.items())), None)
        rows.append([esc(p["workload"]), fmt_num(p["data_x"]), esc(p["peer"]), esc(p["store"]),
                     esc(p["delivery"]), fmt_num(e["median"]),
                     fmt_num(p99["median"]) if p99 else "&ndash;"])
    return table(["workload", "data &times; budget", "peer", "store", "delivery",
                  "fault median (us)", "fault p99 (us)"], rows)


def table_table(entries):
    rows = []
    for e in entries:
        if e["name"] != "pager_table_lookup_ns":
            continue
        p = e["params"]
        b = next((f for f in entries if f["name"] == "pager_table_bytes_per_page" and
                  f["params"] == p), None)
        rows.append([esc(p["table"]), "{:,}".format(p["pages"]), fmt_num(e["median"]),
                     fmt_num(b["median"]) if b else "&ndash;"])
    return table(["structure", "pages", "lookup (ns)", "bytes per page"], rows)


def plot(entries, path):
    plt = report.pyplot()
    cols = columns(entries)
    keys = [k for k in row_keys(entries) if k[0] != "kernel-zram"]
    fig, ax = plt.subplots(figsize=(max(8, len(cols) * 1.6), 4.5))
    width = 0.8 / max(1, len(keys))
    for i, k in enumerate(keys):
        ys = [ratio(find_ops(entries, w, x, *k), entries) or 0 for w, x in cols]
        ax.bar([c + i * width for c in range(len(cols))], ys, width,
               label="%s / %s / %s" % k)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([c + 0.4 - width / 2 for c in range(len(cols))])
    ax.set_xticklabels(["%s\n%sx budget" % (w, fmt_num(x)) for w, x in cols])
    ax.set_ylabel("throughput / kernel with zram")
    ax.set_title("Pager throughput relative to the kernel's paging (zram swap)")
    ax.legend(fontsize=6, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def best_exomem(entries, workload, data_x, peer=None):
    best = None
    for e in ops_entries(entries):
        p = e["params"]
        if (p["workload"] == workload and p["data_x"] == data_x and p["peer"].startswith("exomem")
                and (peer is None or p["peer"] == peer)):
            if best is None or e["median"] > best["median"]:
                best = e
    return best


def targets(entries):
    out = []
    mru = best_exomem(entries, "scan", 1.5, "exomem-mru")
    r = ratio(mru, entries)
    out.append({"target": "MRU on the cyclic scan at least 2x the kernel's throughput",
                "verdict": "no data" if r is None else ("met" if r >= 2 else "not met"),
                "detail": "" if r is None else "%.2fx (%s store, %s)" % (
                    r, esc(mru["params"]["store"]), esc(mru["params"]["delivery"]))})
    rs = []
    for x in (2.0, 4.0):
        b = best_exomem(entries, "uniform", x)
        if b is not None and ratio(b, entries) is not None:
            rs.append((x, ratio(b, entries), b))
    verdict = "no data" if not rs else ("met" if all(r >= 0.7 for _, r, _ in rs) else "not met")
    out.append({"target": "uniform random at least 0.7x the kernel's throughput",
                "verdict": verdict,
                "detail": "; ".join("%sx budget: %.2fx (best: %s, %s, %s)" % (
                    fmt_num(x), r, esc(b["params"]["peer"]), esc(b["params"]["store"]),
                    esc(b["params"]["delivery"])) for x, r, b in rs)})
    return out


def store_section(entries):
    """bench_pager_store: the plain file store against the io_uring one."""
    es = [e for e in entries if e["program"] == "bench_pager_store"]
    if not es:
        return ""
    return ("<h3>File stores: pread/pwrite against io_uring</h3><p>The same file through "
            "<code>exo_pager_store_file</code> and <code>exo_pager_store_file_uring</code> "
            "(bench/bench_pager_store.c): a region of twice the budget under random writes "
            "(fault time, accesses and faults per second, 1 and 4 faulting threads, both "
            "deliveries), and the store called directly (ns per 4 KiB call); the file in the "
            "page cache (warm) or dropped from it before each run (cold). Each io_uring row "
            "is compared with the plain store's (docs/pager.md, Stores, says why io_uring "
            "is slower here).</p>" + report.generic_table(es))


def render(entries, papers, out, plots):
    parts = []
    if not ops_entries(entries):
        rest = [e for e in entries if e["program"] != "bench_pager_store"]
        return ("<p><i>No pager measurements in this run.</i></p>" +
                (report.generic_table(rest) if rest else "") + store_section(entries))
    setup = next((e for e in entries if e["name"] == "pager_setup"), None)
    if setup:
        parts.append("<p>Frame budget %s MiB, %s timed operations per run, %s repeat(s).</p>" % (
            fmt_num(setup["median"]), fmt_num(setup["params"].get("ops")),
            fmt_num(setup["params"].get("repeats"))))
        if setup["params"].get("quick"):
            parts.append("<p><b>A --quick run:</b> data at 2&times; the budget only (not "
                         "4&times;), no CLOCK policy and no zstd store, 20,000 operations, one "
                         "repeat, page tables at 1 million pages only (not 100 million).</p>")
    if plots:
        plot(entries, os.path.join(out, "pager.png"))
        parts.append("<p><img src=\"pager.png\" alt=\"%s\"></p>" % esc(TITLE))
    parts.append("<h3>Throughput relative to the kernel with zram swap</h3>")
    parts.append(ratio_table(entries))
    parts.append("<h3>Fault service time (exomem; the kernel's is not visible from user "
                 "space)</h3>")
    parts.append("<p>From the region's own histogram (powers of two: a value is the middle "
                 "of its bucket), timed operations only.</p>")
    parts.append(latency_table(entries))
    parts.append("<h3>Page-table structures</h3><p>Units inserted in order (as a region "
                 "filled front to back; the sorted vector then only appends), then random "
                 "lookups. AVM's prototype used the sorted vector and proposed a hash "
                 "table.</p>")
    parts.append(table_table(entries))
    sw = [e for e in entries if e["name"] == "paged_switch_roundtrip_us"]
    if sw:
        parts.append("<h3>Paged segments: a switch with N dirty pages</h3><p>A 256 MiB segment "
                     "in a VAS, switched in, N pages written, switched out (a paged segment "
                     "writes them back and frees its pager region), per round trip, against an "
                     "ordinary segment of the same size.</p>")
        rows = [[esc(e["params"]["segment"]), fmt_num(e["params"]["dirty_pages"]),
                 report.fmt_stat(e)] for e in sw]
        parts.append(table(["segment", "dirty pages", "round trip (us)"], rows))
    parts.append(store_section(entries))
    return "\n".join(parts)


def _e(name, median, params, unit="kops/s"):
    return report.test_entry(name, median, params, unit, "bench_pager", KEY)


def selftest(check):
    def ops(w, x, peer, store, deliv, v):
        return _e("pager_ops", v, {"workload": w, "data_x": x, "peer": peer, "store": store,
                                   "delivery": deliv})
    es = [ops("scan", 1.5, "kernel-zram", "zram", "kernel", 100.0),
          ops("scan", 1.5, "exomem-mru", "memory-lz4", "threads", 250.0),
          ops("uniform", 2.0, "kernel-zram", "zram", "kernel", 100.0),
          ops("uniform", 2.0, "exomem-lru", "file", "threads", 50.0),
          ops("uniform", 2.0, "exomem-lru", "memory-lz4", "sigbus", 80.0),
          ops("uniform", 4.0, "kernel-zram", "zram", "kernel", 100.0),
          ops("uniform", 4.0, "exomem-fifo", "memory-lz4", "threads", 60.0),
          _e("pager_table_lookup_ns", 30.0, {"table": "radix", "pages": 1000000}, "ns"),
          _e("pager_table_bytes_per_page", 8.0, {"table": "radix", "pages": 1000000}, "B")]
    t = targets(es)
    check(t[0]["verdict"] == "met" and "2.50x" in t[0]["detail"], "pager: MRU 2.5x meets 2x")
    check(t[1]["verdict"] == "not met" and "0.80x" in t[1]["detail"] and "0.60x" in t[1]["detail"],
          "pager: uniform target takes the best config per size and needs every size")
    html = render(es, [], "/nonexistent", False)
    check("2.50x" in html and "0.50x" in html and "100 kops/s" in html,
          "pager: ratios to the kernel on zram in the table")
    check("1,000,000" in html, "pager: page-table sizes shown")
    quick = es + [_e("pager_setup", 16, {"ops": 20000, "repeats": 1, "quick": 1}, "MiB")]
    check("A --quick run" in render(quick, [], "/nonexistent", False),
          "pager: a quick run says what it left out")
    check(targets([])[0]["verdict"] == "no data", "pager: no data, no verdict")
    st = dict(_e("store_read_ns", 3000.0, {"fs": "ext4", "cache": "warm", "threads": 1,
                                           "store": "file-uring"}, "ns"),
              program="bench_pager_store", baseline="store_read_ns", ratio=1.6, cheaper=0.625)
    check("pread/pwrite against io_uring" in render(es + [st], [], "/nonexistent", False) and
          "1.600x dearer" in render(es + [st], [], "/nonexistent", False),
          "pager: the file stores' comparison shown, io_uring against pread")
    check("pread/pwrite against io_uring" in render([st], [], "/nonexistent", False),
          "pager: the file stores' comparison shown without bench_pager's measurements")
