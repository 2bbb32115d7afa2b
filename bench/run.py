#!/usr/bin/python3
"""The one benchmark driver: runs the programs in BUILD/bench, aggregates what they print and
writes report/results.json and report/index.html (with PNG plots, see report.py).

    python3 bench/run.py --build BUILD --out report [--quick] [--only bench_a,bench_b]
    python3 bench/run.py --selftest

Protocol for a benchmark program (bench/*.c): one JSON object per stdout line,
    {"name": N, "unit": U, "value": V, "params": {...}}            one measurement (a repeat)
    ... "baseline": "other_name"                                 compare with that measurement
    ... "baseline_params": {...}                                 ... taken with these params
    {"name": "skip", "params": {...}, "reason": "..."}           something it could not measure
Repeats of one (program, name, unit, params) give median, min and max. With a baseline,
ratio = median / baseline median and "cheaper" = how many times cheaper (1/ratio for times,
ratio for rates such as ops/s). Other stdout lines are ignored; stderr is kept for the
report. With --quick the driver passes --quick to every program, which must then finish in
well under a minute or two.
Each program runs with its own temporary EXOMEM_ROOT under /dev/shm, removed afterwards.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import report  # noqa: E402 (html, plots, number formatting; matplotlib only when plotting)
from report import fmt_bytes, fmt_num, convert as to_unit  # noqa: E402

# The known programs in report order; then the programs of the section modules
# (bench/sections/*.py); any other executable in BUILD/bench runs after them.
KNOWN_PROGRAMS = ["bench_pagetables", "bench_ctxswitch", "bench_switch", "bench_lock"]

# Report sections: (key, title). An entry lands in its program's section; a program not
# listed here goes by the measurement's name prefix, else to "other".
SECTIONS = [
    ("fig1", "Figure 1: page-table build and removal cost"),
    ("table2", "Table 2: vas_switch cost"),
    ("lock", "Lock cost"),
]
SECTION_BY_PROGRAM = {"bench_pagetables": "fig1", "bench_ctxswitch": "table2",
                      "bench_switch": "table2", "bench_lock": "lock"}
SECTION_BY_NAME_PREFIX = [("pt_", "fig1"), ("ctxswitch", "table2"), ("switch_", "table2"),
                          ("vas_switch", "table2"), ("mmap_populate", "table2")]
# (paper, where in it) a paper number comes from -> the section it is shown in. Keyed by paper
# too: "Figure 1" of SpaceJMP and "Figure 1" of AVM are different figures.
SECTION_BY_PAPER_PLACE = [("spacejmp", "Figure 1", "fig1"), ("spacejmp", "Table 2", "table2")]
# Seconds a program may run in a full (not --quick) run, where the default is not enough.
TIMEOUT_BY_PROGRAM = {}
# The same for --quick runs (sections' QUICK_TIMEOUT): a quick form that must first build
# what a later run reuses (the CARAT programs) needs more than the default.
QUICK_TIMEOUT_BY_PROGRAM = {}
# Arguments a program gets in a full run unless --program-args names it (sections' FULL_ARGS):
# what keeps the whole report within its two hours.
FULL_ARGS_BY_PROGRAM = {}


def load_section_modules():
    """Import bench/sections/*.py in ORDER, and register their sections, programs, name
    prefixes, paper places and timeouts. A section module defines KEY, TITLE, INTRO, ORDER and
    PROGRAMS, and optionally FULL_ARGS ({program: [args]} for full runs), NAME_PREFIXES,
    PAPER_PLACES ((paper file name, place prefix)
    pairs, e.g. ("hybrid-segmentation", "Figure 5")), PAPERS (file names in bench/paper whose
    numbers all belong to it), TIMEOUT (seconds, full runs), QUICK_TIMEOUT (seconds, --quick
    runs), targets(entries) -> [target]
    and render(entries, papers, out, plots) -> html (else the generic table and bar plot)."""
    import importlib.util
    mods = []
    for path in sorted(glob.glob(os.path.join(HERE, "sections", "*.py"))):
        name = "exomem_section_" + os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mods.append(mod)
    mods.sort(key=lambda m: (getattr(m, "ORDER", 100), m.KEY))
    for m in mods:
        SECTIONS.append((m.KEY, m.TITLE))
        report.SECTION_INTRO[m.KEY] = m.INTRO
        for prog in m.PROGRAMS:
            SECTION_BY_PROGRAM[prog] = m.KEY
            if prog not in KNOWN_PROGRAMS:
                KNOWN_PROGRAMS.append(prog)
            if getattr(m, "TIMEOUT", None):
                TIMEOUT_BY_PROGRAM[prog] = m.TIMEOUT
            if getattr(m, "QUICK_TIMEOUT", None):
                QUICK_TIMEOUT_BY_PROGRAM[prog] = m.QUICK_TIMEOUT
        FULL_ARGS_BY_PROGRAM.update(getattr(m, "FULL_ARGS", {}))
        SECTION_BY_NAME_PREFIX.extend((pre, m.KEY) for pre in getattr(m, "NAME_PREFIXES", []))
        SECTION_BY_PAPER_PLACE.extend((paper, place, m.KEY)
                                      for paper, place in getattr(m, "PAPER_PLACES", []))
        for paper in getattr(m, "PAPERS", []):
            PAPER_SECTION[paper] = m.KEY
    SECTIONS.append(("other", "Other"))
    return mods


PAPER_SECTION = {}  # paper file name (without .json) -> section key, from section modules
SECTION_MODULES = load_section_modules()

GIB = 1 << 30

# The two targets of Table 2 (from the project brief).
TARGET_CHEAPER_THAN_MMAP = 1000.0   # park switch >= this many times cheaper than mmap 1 GiB
TARGET_WITHIN_CTXSWITCH = 5.0       # park switch <= this many process context switches


# ---------------------------------------------------------------------------------------
# machine facts

def read_text(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def hugepage_pools():
    """{"vm.nr_hugepages": n, "2048kB": {"nr": n, "free": f}, ...} as the kernel shows them."""
    pools = {"vm.nr_hugepages": read_text("/proc/sys/vm/nr_hugepages")}
    for d in sorted(glob.glob("/sys/kernel/mm/hugepages/hugepages-*")):
        size = os.path.basename(d).split("-", 1)[1]
        pools[size] = {"nr": read_text(d + "/nr_hugepages"),
                       "free": read_text(d + "/free_hugepages")}
    return pools


def machine_facts():
    cpu = "unknown"
    for line in (read_text("/proc/cpuinfo", "") or "").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = "unknown"
    for line in (read_text("/proc/meminfo", "") or "").splitlines():
        if line.startswith("MemTotal:"):
            kib = int(line.split()[1])
            mem = "%d kB (%.1f GiB)" % (kib, kib / 1048576.0)
            break
    thp = read_text("/sys/kernel/mm/transparent_hugepage/enabled", "unknown")
    if "[" in thp:
        thp = thp[thp.index("[") + 1:thp.index("]")]
    return {
        "kernel": platform.release(),
        "cpu_model": cpu,
        "cores": os.cpu_count(),
        "mem_total": mem,
        "hugepages": hugepage_pools(),
        "thp_enabled": thp,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "python": platform.python_version(),
    }


# ---------------------------------------------------------------------------------------
# running the programs

def parse_output(text, program):
    """Measurement records and skip notes from a program's stdout."""
    records, skips = [], []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            continue
        params = obj.get("params") if isinstance(obj.get("params"), dict) else {}
        if obj["name"] == "skip":
            skips.append({"program": program, "params": params,
                          "reason": str(obj.get("reason", ""))})
            continue
        value = obj.get("value")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        rec = {"program": program, "name": obj["name"], "unit": str(obj.get("unit", "")),
               "value": float(value), "params": params,
               "baseline": obj.get("baseline") if isinstance(obj.get("baseline"), str) else None}
        if isinstance(obj.get("baseline_params"), dict):
            rec["baseline_params"] = obj["baseline_params"]
        if isinstance(obj.get("note"), str):
            rec["note"] = obj["note"]
        records.append(rec)
    return records, skips


HEARTBEAT_SECONDS = 60


def communicate_with_heartbeat(proc, program, timeout, start):
    """proc.communicate(timeout), printing a line every HEARTBEAT_SECONDS so that a long
    program shows it is still running. Raises TimeoutExpired as communicate does."""
    while True:
        left = timeout - (time.monotonic() - start)
        if left <= 0:
            raise subprocess.TimeoutExpired(proc.args, timeout)
        try:
            return proc.communicate(timeout=min(left, HEARTBEAT_SECONDS))
        except subprocess.TimeoutExpired:
            if time.monotonic() - start >= timeout:
                raise
            print("run.py:   %s still running, %s so far" % (program, fmt_duration(
                time.monotonic() - start)), flush=True)


def fmt_duration(seconds):
    seconds = int(seconds)
    return "%d:%02d:%02d" % (seconds // 3600, seconds // 60 % 60, seconds % 60) \
        if seconds >= 3600 else "%d:%02d" % (seconds // 60, seconds % 60)


def previous_seconds(out):
    """Each program's run time in the last report in `out` (for the progress estimate)."""
    try:
        with open(os.path.join(out, "results.json")) as f:
            return {r["program"]: r.get("seconds") or 0 for r in json.load(f).get("runs", [])}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def progress_line(i, n, name, elapsed, remaining_known, unknown):
    """'[i/n] name: elapsed ..., about ... left' with the estimate from the last run."""
    left = "about %s left by the last run's times" % fmt_duration(remaining_known)
    if unknown:
        left += " (+%d program%s never timed)" % (unknown, "" if unknown == 1 else "s")
    return "run.py: [%d/%d] %s: %s elapsed, %s" % (i, n, name, fmt_duration(elapsed), left)


def run_program(path, quick, timeout, extra_args=()):
    """Run one benchmark in a private registry; returns (records, run-info dict)."""
    program = os.path.basename(path)
    info = {"program": program, "status": "ok", "rc": None, "seconds": 0.0, "stderr": "",
            "skips": [], "started": datetime.datetime.now().isoformat(timespec="seconds")}
    root = tempfile.mkdtemp(prefix="exomem-bench-", dir="/dev/shm")
    os.chmod(root, 0o1777)
    env = dict(os.environ, EXOMEM_ROOT=root)
    cmd = [path] + (["--quick"] if quick else []) + list(extra_args)
    start = time.monotonic()
    out = err = ""
    try:
        # Own session, so a timeout can stop the program and any children it forked.
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                text=True, errors="replace", start_new_session=True)
        try:
            out, err = communicate_with_heartbeat(proc, program, timeout, start)
        except (subprocess.TimeoutExpired, KeyboardInterrupt) as e:
            out, err = stop_program(proc)
            if isinstance(e, KeyboardInterrupt):
                raise
            info["status"] = "timed out after %d s (partial results kept)" % timeout
        info["rc"] = proc.returncode
        if info["status"] == "ok" and proc.returncode == 77:
            info["status"] = "skipped (exit 77)"
        elif info["status"] == "ok" and proc.returncode != 0:
            info["status"] = "failed: exit code %d (partial results kept)" % proc.returncode
    except OSError as e:
        info["status"] = "failed to start: %s" % e
    finally:
        unmount_under(root)
        shutil.rmtree(root, ignore_errors=True)
    info["seconds"] = round(time.monotonic() - start, 1)
    info["stderr"] = err or ""
    records, info["skips"] = parse_output(out or "", program)
    return records, info


def unmount_under(root):
    """Unmount what a program left mounted in its registry (the library's private huge page
    mounts, if it died before deleting its segments), so the directory can go and the huge
    pages return to the pool."""
    try:
        with open("/proc/self/mounts") as f:
            points = [line.split()[1] for line in f if len(line.split()) > 1]
    except OSError:
        return
    for mp in sorted((p for p in points if p.startswith(root + "/")), reverse=True):
        subprocess.run(["umount", "-l", mp], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)


def stop_program(proc):
    """SIGTERM first, so a benchmark can put huge page pools back; SIGKILL if it lingers."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            return proc.communicate(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    return "", ""


def find_programs(build, only):
    """[(name, path or None if not built)]: the known programs in order, then any others."""
    bench_dir = os.path.join(build, "bench")
    found = []
    if os.path.isdir(bench_dir):
        for name in sorted(os.listdir(bench_dir)):
            path = os.path.join(bench_dir, name)
            if name.startswith("bench_") and os.path.isfile(path) and os.access(path, os.X_OK):
                found.append(name)
    names = KNOWN_PROGRAMS + [p for p in found if p not in KNOWN_PROGRAMS]
    return [(p, os.path.join(bench_dir, p) if p in found else None) for p in names
            if not only or p in only]


# ---------------------------------------------------------------------------------------
# aggregation

def params_key(params):
    return json.dumps(params, sort_keys=True)


def section_of(program, name):
    if program in SECTION_BY_PROGRAM:
        return SECTION_BY_PROGRAM[program]
    for prefix, sec in SECTION_BY_NAME_PREFIX:
        if name.startswith(prefix):
            return sec
    return "other"


def aggregate(records):
    """Group records by (program, name, unit, params): median, min, max, repeats; then ratios."""
    groups = {}
    for r in records:
        key = (r["program"], r["name"], r["unit"], params_key(r["params"]))
        groups.setdefault(key, []).append(r)
    entries = []
    for (program, name, unit, _), recs in groups.items():
        values = [r["value"] for r in recs]
        first = recs[0]
        entries.append({
            "program": program, "name": name, "unit": unit, "params": first["params"],
            "section": section_of(program, name),
            "median": statistics.median(values), "min": min(values), "max": max(values),
            "repeats": len(values), "baseline": first.get("baseline"),
            "baseline_params": first.get("baseline_params"),
            "note": first.get("note"), "ratio": None, "cheaper": None,
        })
    compute_ratios(entries)
    return entries


def compute_ratios(entries):
    """Each entry's ratio to its baseline entry (None without one)."""
    for e in entries:
        e["ratio"] = e["cheaper"] = None
        base = find_baseline(entries, e)
        if base is None:
            continue
        base_median = to_unit(base["median"], base["unit"], e["unit"])
        if base_median and e["median"] > 0:
            e["ratio"] = e["median"] / base_median
            # "x cheaper" in cost terms: for a rate (ops/s) more is cheaper, else less is.
            e["cheaper"] = e["ratio"] if is_rate(e["unit"]) else 1.0 / e["ratio"]


def is_rate(unit):
    return unit.endswith("/s")


def find_baseline(entries, e):
    """The entry e names as baseline: same params (or its baseline_params), same program
    preferred, any program otherwise."""
    if not e["baseline"]:
        return None
    want = params_key(e["baseline_params"] if e["baseline_params"] is not None else e["params"])
    matches = [b for b in entries if b["name"] == e["baseline"] and params_key(b["params"]) == want]
    matches.sort(key=lambda b: b["program"] != e["program"])
    return matches[0] if matches else None


# ---------------------------------------------------------------------------------------
# the Table 2 targets

def total_bytes(params):
    if "bytes" in params:
        return int(params["bytes"])
    if "seg_bytes" in params:
        return int(params["seg_bytes"]) * int(params.get("segs", 1))
    return 0


def pick_park_switch(entries):
    """The park-engine switch the targets are judged on: 1 GiB in one segment if measured."""
    # switch_inout is a round trip (two switches) and *_step a part of one: not a switch.
    cands = [e for e in entries if "switch" in e["name"] and
             e["name"] != "switch_inout" and not e["name"].endswith("_step") and
             ("park" in e["name"] or e["params"].get("engine") == "park")]
    cands.sort(key=lambda e: (e["name"] != "switch_park", total_bytes(e["params"]) != GIB,
                              e["params"].get("segs", 1) != 1,
                              e["params"].get("peer", "vas") != "vas", -total_bytes(e["params"])))
    return cands[0] if cands else None


def evaluate_targets(entries):
    """[{"target", "verdict": "met"|"not met"|"no data", "detail"}] for Table 2's targets."""
    park = pick_park_switch(entries)
    t1 = {"target": "park vas_switch at least %gx cheaper than mmap+populate of 1 GiB"
                    % TARGET_CHEAPER_THAN_MMAP, "verdict": "no data", "detail": ""}
    t2 = {"target": "park vas_switch within %gx of a process context switch"
                    % TARGET_WITHIN_CTXSWITCH, "verdict": "no data", "detail": ""}
    if park is None:
        t1["detail"] = t2["detail"] = "no park-engine switch measurement (bench_switch missing?)"
        return [t1, t2]
    size = total_bytes(park["params"])
    where = "measured at %s%s" % (fmt_bytes(size) if size else "unknown size",
                                  "" if size == GIB else " (not 1 GiB: indicative only)")
    base = find_baseline(entries, park)
    if base is None:  # fall back to Figure 1's shm mapping of 1 GiB (build only)
        base = next((e for e in entries if e["name"] == "pt_build" and e["params"].get("page") == "4K"
                     and e["params"].get("backing") == "shm" and total_bytes(e["params"]) == GIB), None)
    if base is None:
        t1["detail"] = "no mmap+populate measurement to compare with"
    else:
        base_med = to_unit(base["median"], base["unit"], park["unit"])
        cheaper = base_med / park["median"] if base_med and park["median"] > 0 else None
        if cheaper is not None:
            t1["verdict"] = "met" if cheaper >= TARGET_CHEAPER_THAN_MMAP else "not met"
            t1["detail"] = ("%s %s %s vs %s %s %s: %.0fx cheaper; %s" % (
                park["name"], fmt_num(park["median"]), park["unit"], base["name"],
                fmt_num(base["median"]), base["unit"], cheaper, where))
    ctx = [e for e in entries if e["name"] == "ctxswitch_pipe"]
    ctx.sort(key=lambda e: e["program"] != park["program"])
    if not ctx:
        t2["detail"] = "no ctxswitch_pipe measurement"
    else:
        c = ctx[0]
        c_med = to_unit(c["median"], c["unit"], park["unit"])
        if c_med:
            times = park["median"] / c_med
            t2["verdict"] = "met" if times <= TARGET_WITHIN_CTXSWITCH else "not met"
            t2["detail"] = ("%s %s %s vs ctxswitch_pipe (%s) %s %s: %.2fx a context switch; %s"
                            % (park["name"], fmt_num(park["median"]), park["unit"], c["program"],
                               fmt_num(c["median"]), c["unit"], times, where))
    return [t1, t2]


def all_targets(entries):
    """Table 2's targets, then each section module's, each tagged with its section."""
    targets = [dict(t, section="table2") for t in evaluate_targets(entries)]
    for m in SECTION_MODULES:
        if hasattr(m, "targets"):
            mine = [e for e in entries if e["section"] == m.KEY]
            targets += [dict(t, section=m.KEY) for t in m.targets(mine)]
    return targets


# ---------------------------------------------------------------------------------------
# papers and output

def load_papers(paper_dir):
    """Every paper number, tagged with the paper it came from and the section it belongs to."""
    numbers = []
    for path in sorted(glob.glob(os.path.join(paper_dir, "*.json"))):
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            print("run.py: cannot read %s: %s" % (path, e), file=sys.stderr)
            continue
        paper = os.path.splitext(os.path.basename(path))[0]
        for n in data.get("numbers", []):
            n = dict(n, paper=paper)
            n["section"] = paper_section(paper, n.get("where", ""))
            numbers.append(n)
    return numbers


def paper_section(paper, where):
    """The section a number from `paper` (its file name) at `where` is shown in: the section
    that claims the whole paper, else the one that claims that place of that paper."""
    if paper in PAPER_SECTION:
        return PAPER_SECTION[paper]
    return next((s for pp, place, s in SECTION_BY_PAPER_PLACE
                 if pp == paper and place_matches(str(where), place)), "other")


def place_matches(where, place):
    """Does `where` name `place`? A prefix that ends where a number ends: "Figure 1, quoted"
    is Figure 1; "Figure 10" and "Figure 12" are not."""
    return where.startswith(place) and not where[len(place):len(place) + 1].isdigit()


def write_outputs(out, machine, entries, runs, targets, papers):
    """results.json, then index.html + PNGs (plots need matplotlib)."""
    os.makedirs(out, exist_ok=True)
    results = {"machine": machine, "targets": targets, "runs": [
        {k: r.get(k) for k in ("program", "status", "rc", "seconds", "skips", "started",
                               "stderr", "args")} for r in runs],
        "results": [{k: e.get(k) for k in ("name", "unit", "params", "median", "min", "max",
                                           "repeats", "baseline", "baseline_params", "note",
                                           "ratio", "cheaper", "program", "section")}
                    for e in entries]}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    renderers = {m.KEY: m.render for m in SECTION_MODULES if hasattr(m, "render")}
    report.write_html(out, machine, entries, runs, targets, papers, SECTIONS, renderers)


def merge_previous(out, entries, runs):
    """--update: keep the previous report's results and runs of the programs not run now."""
    try:
        with open(os.path.join(out, "results.json")) as f:
            prev = json.load(f)
    except (OSError, ValueError):
        return entries, runs
    now = {r["program"] for r in runs}
    kept = [dict(e, section=section_of(e["program"], e["name"]))
            for e in prev.get("results", []) if e.get("program") not in now]
    kept_runs = [dict({"stderr": "", "skips": [], "started": None}, **r)
                 for r in prev.get("runs", []) if r.get("program") not in now]
    merged = kept + entries
    compute_ratios(merged)
    order = {p: i for i, p in enumerate(KNOWN_PROGRAMS)}
    all_runs = sorted(kept_runs + runs, key=lambda r: order.get(r["program"], len(order)))
    return merged, all_runs


def run_all(args):
    machine = machine_facts()
    shm_before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else None
    only = set(args.only.split(",")) if args.only else None
    runs, records = [], []
    programs = list(find_programs(args.build, only))
    before = previous_seconds(args.out)
    begun = time.monotonic()
    for index, (name, path) in enumerate(programs, 1):
        rest = [p for p, _ in programs[index - 1:]]
        print(progress_line(index, len(programs), name, time.monotonic() - begun,
                            sum(before.get(p, 0) for p in rest),
                            sum(1 for p in rest if p not in before)), flush=True)
        if path is None:
            runs.append({"program": name, "status": "missing: not built (no %s/bench/%s)"
                         % (args.build, name), "rc": None, "seconds": 0, "stderr": "",
                         "skips": []})
            print("run.py: %s: not built, skipped" % name, flush=True)
            continue
        print("run.py: %s%s ..." % (name, " --quick" if args.quick else ""), flush=True)
        timeout = args.timeout
        if not args.timeout_given:
            timeout = max(timeout, (QUICK_TIMEOUT_BY_PROGRAM if args.quick
                                    else TIMEOUT_BY_PROGRAM).get(name, 0))
        extra = args.program_args.get(name, [] if args.quick else
                                      FULL_ARGS_BY_PROGRAM.get(name, []))
        if extra:
            print("run.py:   with %s" % " ".join(extra), flush=True)
        recs, info = run_program(path, args.quick, timeout, extra)
        info["args"] = extra
        print("run.py:   %s, %d measurements, %d skipped, %.0f s"
              % (info["status"], len(recs), len(info["skips"]), info["seconds"]), flush=True)
        if info["status"] != "ok" and info["stderr"]:
            print("\n".join(info["stderr"].splitlines()[-10:]), file=sys.stderr)
        records += recs
        runs.append(info)
    # Benchmarks must leave nothing behind: say so in the report if one did.
    machine["hugepages_after"] = hugepage_pools()
    leftovers = sorted(set(os.listdir("/dev/shm")) - shm_before) if shm_before is not None else []
    if leftovers:  # (or made by something else running meanwhile)
        machine["dev_shm_new_entries"] = leftovers
    machine["mode"] = "quick" if args.quick else "full"
    entries = aggregate(records)
    if args.update:
        entries, runs = merge_previous(args.out, entries, runs)
        machine["mode"] += " (programs run at different times: see Runs)"
    targets = all_targets(entries)
    papers = load_papers(args.paper_dir)
    write_outputs(args.out, machine, entries, runs, targets, papers)
    print("run.py: wrote %s/results.json and %s/index.html" % (args.out, args.out))
    for t in targets:
        print("run.py: target: %s: %s (%s)" % (t["target"], t["verdict"].upper(), t["detail"]))
    return 0


# ---------------------------------------------------------------------------------------
# self-test: the arithmetic and the outputs, on made-up lines; runs no benchmark

def selftest():
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
            print("selftest: FAIL: " + what, file=sys.stderr)

    fake = "\n".join([
        "warming up (not JSON)",
        '{"name":"pt_build","unit":"ms","value":3,"params":{"page":"4K","bytes":1073741824,"backing":"shm"}}',
        '{"name":"pt_build","unit":"ms","value":1,"params":{"page":"4K","bytes":1073741824,"backing":"shm"}}',
        '{"name":"pt_build","unit":"ms","value":2,"params":{"page":"4K","bytes":1073741824,"backing":"shm"}}',
        '{"name":"pt_build","unit":"ms","value":10,"params":{"page":"4K","bytes":1073741824,"backing":"shm"}}',
        '{"name":"pt_remove","unit":"ms","value":0.5,"params":{"page":"4K","bytes":1073741824,"backing":"shm"}}',
        '{"name":"pt_build","unit":"ms","value":0.1,"params":{"page":"2M","bytes":2097152,"backing":"anon"}}',
        '{"name":"skip","params":{"page":"1G","bytes":4294967296},"reason":"pool too small"}',
        '{"name":"broken", "unit":"us"',
        '{"name":"novalue","unit":"us","value":"fast","params":{}}',
    ])
    recs, skips = parse_output(fake, "bench_pagetables")
    check(len(recs) == 6, "6 measurements parsed, got %d" % len(recs))
    check(len(skips) == 1 and skips[0]["reason"] == "pool too small", "skip line kept as a note")

    g = 1 << 30
    sw = {"segs": 1, "seg_bytes": g, "peer": "vas"}
    lines = [
        ("switch_park", "us", v, sw, "mmap_populate") for v in (4.0, 6.0, 5.0)] + [
        ("mmap_populate", "us", v, sw, None) for v in (10000.0, 12000.0)] + [
        ("ctxswitch_pipe", "us", v, {}, None) for v in (2.0, 2.5, 1.5)] + [
        ("lock_ofd", "ns", 900.0, {}, None), ("alloc_small", "ns", 50.0, {"size": 16}, None),
        ("mystery", "widgets", 7.0, {}, None),
        ("alloc_fast", "Mops/s", 20.0, {}, "alloc_slow"), ("alloc_slow", "Mops/s", 5.0, {}, None)]
    programs = {"lock_ofd": "bench_lock", "alloc_small": "bench_alloc", "mystery": "bench_new",
                "alloc_fast": "bench_alloc", "alloc_slow": "bench_alloc"}
    for name, unit, value, params, base in lines:
        prog = programs.get(name, "bench_switch")
        rec = {"program": prog, "name": name, "unit": unit, "value": value, "params": params,
               "baseline": base}
        recs.append(rec)
    entries = aggregate(recs)
    by = {(e["name"], params_key(e["params"])): e for e in entries}
    b = by[("pt_build", params_key({"page": "4K", "bytes": g, "backing": "shm"}))]
    check((b["median"], b["min"], b["max"], b["repeats"]) == (2.5, 1, 10, 4),
          "even-count median/min/max/repeats: %r" % ((b["median"], b["min"], b["max"], b["repeats"]),))
    p = by[("switch_park", params_key(sw))]
    check(p["median"] == 5.0 and p["repeats"] == 3, "odd-count median")
    check(abs(p["ratio"] - 5.0 / 11000.0) < 1e-12, "ratio = median / baseline median")
    check(abs(p["cheaper"] - 2200.0) < 1e-9, "cheaper = baseline median / median")
    check(by[("ctxswitch_pipe", "{}")]["ratio"] is None, "no baseline, no ratio")
    fast = by[("alloc_fast", "{}")]
    check(fast["ratio"] == 4.0 and fast["cheaper"] == 4.0, "a rate 4x the baseline's is 4x cheaper")
    check(abs(to_unit(1.0, "ms", "us") - 1000.0) < 1e-9 and to_unit(1.0, "ms", "widgets") is None,
          "unit conversion")
    sections = {e["name"]: e["section"] for e in entries}
    check(sections["pt_build"] == "fig1" and sections["switch_park"] == "table2" and
          sections["lock_ofd"] == "lock" and sections["alloc_small"] == "alloc" and
          sections["mystery"] == "other", "sections")

    targets = evaluate_targets(entries)
    check(targets[0]["verdict"] == "met", "2200x cheaper meets the 1000x target")
    check(targets[1]["verdict"] == "met", "5 us vs 2 us context switch is within 5x")
    slow = [dict(e, median=e["median"] * 100) if e["name"] == "switch_park" else e
            for e in entries]
    targets_slow = evaluate_targets(slow)
    check(targets_slow[0]["verdict"] == "not met" and targets_slow[1]["verdict"] == "not met",
          "a 100x slower switch misses both targets")
    check(evaluate_targets([])[0]["verdict"] == "no data", "no data, no verdict")
    for m in SECTION_MODULES:
        check(all(hasattr(m, a) for a in ("KEY", "TITLE", "INTRO", "PROGRAMS")),
              "section module %s defines KEY, TITLE, INTRO and PROGRAMS" % m.__name__)
        if hasattr(m, "selftest"):
            m.selftest(check)

    check(paper_section("spacejmp", "Figure 1, quoted in Section 2.4") == "fig1" and
          paper_section("hybrid-segmentation", "Figure 5, Section 4.2.1") == "fig5" and
          paper_section("hybrid-segmentation", "Figure 1") == "other" and
          paper_section("spacejmp", "Figure 10") != "fig1" and
          paper_section("spacejmp", "Figure 12, caption") != "fig1" and
          paper_section("no-such-paper", "Table 2") == "other" and
          paper_section("carat", "Table 3") == "carat" and
          paper_section("carat", "Table 1") == "carat_programs" and
          paper_section("avm", "AVM, Figure 1") == PAPER_SECTION["avm"] != "fig1",
          "paper numbers are routed by paper and place, not by place alone")

    line = progress_line(2, 5, "bench_x", 125, 3700, 1)
    check("[2/5] bench_x: 2:05 elapsed, about 1:01:40 left" in line and "+1 program never"
          in line, "progress line: %s" % line)
    tmp = tempfile.mkdtemp(prefix="exomem-report-selftest-")
    try:
        machine = machine_facts()
        runs = [{"program": "bench_pagetables", "status": "ok", "rc": 0, "seconds": 1.0,
                 "stderr": "note <on stderr>", "skips": skips},
                {"program": "bench_lock", "status": "missing: not built", "rc": None,
                 "seconds": 0, "stderr": "", "skips": []}]
        write_outputs(tmp, machine, entries, runs, all_targets(entries),
                      load_papers(os.path.join(HERE, "paper")))
        with open(os.path.join(tmp, "results.json")) as f:
            res = json.load(f)
        check("machine" in res and "kernel" in res["machine"], "results.json has machine facts")
        check(len(res["results"]) == len(entries), "results.json has every entry")
        with open(os.path.join(tmp, "index.html")) as f:
            html = f.read()
        for title in [t for k, t in SECTIONS if k != "other"] + ["class=\"met\">MET", "note &lt;on stderr&gt;"]:
            check(title in html, "index.html contains %r" % title)
        pngs = glob.glob(os.path.join(tmp, "*.png"))
        check(len(pngs) >= 4, "PNG plots written (%d)" % len(pngs))
        # --update: a rerun of bench_alloc replaces its entries and keeps everyone else's.
        rerun = aggregate([{"program": "bench_alloc", "name": "alloc_fast", "unit": "Mops/s",
                            "value": 10.0, "params": {}, "baseline": "alloc_slow"},
                           {"program": "bench_alloc", "name": "alloc_slow", "unit": "Mops/s",
                            "value": 5.0, "params": {}, "baseline": None}])
        merged, mruns = merge_previous(tmp, rerun, [dict(runs[0], program="bench_alloc")])
        mby = {(e["program"], e["name"]): e for e in merged}
        check(mby[("bench_alloc", "alloc_fast")]["ratio"] == 2.0, "--update: new ratio")
        check(("bench_alloc", "alloc_small") not in mby, "--update: old entries of a rerun go")
        kept = mby.get(("bench_switch", "switch_park"))
        check(kept is not None and abs(kept["cheaper"] - 2200.0) < 1e-9,
              "--update: other programs' entries and ratios stay")
        check(sorted(r["program"] for r in mruns) == ["bench_alloc", "bench_lock",
                                                     "bench_pagetables"], "--update: runs merged")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("selftest: %d failure(s)" % len(failures), file=sys.stderr)
        return 1
    print("selftest: ok")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="CMake build directory (programs in BUILD/bench)")
    ap.add_argument("--out", default="report", help="output directory")
    ap.add_argument("--quick", action="store_true", help="pass --quick to every program")
    ap.add_argument("--only", help="comma-separated program names to run")
    ap.add_argument("--program-args", action="append", default=[], metavar="PROGRAM=ARGS",
                    help="extra arguments for one program, e.g. bench_graph500='--budget 900'")
    ap.add_argument("--update", action="store_true",
                    help="keep the results of programs not run now from OUT/results.json")
    ap.add_argument("--timeout", type=int, default=None,
                    help="seconds per program (default 900, quick 300)")
    ap.add_argument("--paper-dir", default=os.path.join(HERE, "paper"))
    ap.add_argument("--selftest", action="store_true", help="check the driver; runs no benchmark")
    args = ap.parse_args()
    if args.selftest:
        return selftest()
    program_args = {}
    for item in args.program_args:
        name, sep, rest = item.partition("=")
        if not sep or not name:
            ap.error("--program-args wants PROGRAM=ARGS, not %r" % item)
        program_args[name] = shlex.split(rest)
    args.program_args = program_args
    args.timeout_given = args.timeout is not None
    if args.timeout is None:
        args.timeout = 300 if args.quick else 900
    # A SIGTERM (kill, a CI's timeout) stops the run as Ctrl-C does: the benchmark running
    # is stopped and its registry in /dev/shm removed. Without this the driver died at
    # once, and left both behind.
    signal.signal(signal.SIGTERM, interrupted)
    return run_all(args)


def interrupted(signum, frame):
    """SIGTERM handler: raise KeyboardInterrupt, which the runs clean up after."""
    raise KeyboardInterrupt("signal %d" % signum)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("run.py: interrupted: the running benchmark was stopped, no report written",
              file=sys.stderr)
        sys.exit(130)
