#!/usr/bin/python3
"""CARAT's evaluation on real programs (issue 12; docs/carat.md): each program of
bench/carat/programs/ is fetched from Debian's sources, built in seven modes, its own test
suite is run with tracking, with guards and under moves (SUITE_MODES), and its workload is
timed, all modes side by side in one run. Prints one JSON record per measurement for
bench/run.py (the report's "carat" section), progress on stderr.

Builds are cached in <build>/bench-data/carat/<program>/<mode>, keyed by what the recipe
builds with (its functions but run_suite and run_workload, and its variables) and clang,
and the instrumented modes' also by the bytes of the plugin, the runtime and exomem-cc: a
second run rebuilds only what changed, and an edit of a suite or workload rebuilds nothing.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

MODES = {
    # mode: (compiler, extra CFLAGS/LDFLAGS, EXOMEM_CARAT_PARTS, EXOMEM_CARAT_GUARD_OPT)
    "base": ("clang", "", None, None),
    "track": ("exomem-cc", "", "track,escapes", None),
    # the opt-in form of tracking (docs/carat-shadow.md): escapes in a shadow, found by scans
    "shadow": ("exomem-cc", "", "track,shadow", None),
    "guards-noopt": ("exomem-cc", "", "guards", "none"),
    "guards": ("exomem-cc", "", "guards", "all"),
    # What moves need, the build the suites run under moves: tracking with its escapes in
    # the shadow. With the escape log (the default) sqlite3's suite took 10-13 minutes a
    # rate and Lua's workload 14x, and the section did not fit its 45 minutes; the escape
    # log's build ("track") runs its suite under moves at the highest rate, last.
    "carat": ("exomem-cc", "", "track,shadow,guards", "all"),
    "asan": ("clang", "-fsanitize=address", None, None),
}
# The modes whose build runs the suite without moves: the plain build (does the suite pass
# here at all?), the two forms of tracking and the guards, as the issue asks. The moved
# build runs it at every rate (the lowest stands for the build without moves), and
# guards-noopt and ASan only give times: their suites were a quarter of the suites' time.
SUITE_MODES = ("base", "track", "shadow", "guards")
FULL_RATES = [1, 100, 10000]
# Workload rounds run before the suites under moves; the rest of --repeats after them.
BASE_ROUNDS = 3
QUICK_RATES = [100, 10000]
VMSTAT_KEYS = ("pgfault", "pgmajfault", "pgalloc_normal", "pgalloc_dma32", "pgfree",
               "pgmigrate_success", "thp_fault_alloc", "numa_pages_migrated")


def log(msg):
    print("bench_carat_programs: " + msg, file=sys.stderr, flush=True)


def emit(name, unit, value, params, baseline=None, baseline_params=None, note=None):
    rec = {"name": name, "unit": unit, "value": value, "params": params}
    if baseline:
        rec["baseline"] = baseline
    if baseline_params is not None:
        rec["baseline_params"] = baseline_params
    if note:
        rec["note"] = note
    print(json.dumps(rec), flush=True)


def skip(params, reason):
    print(json.dumps({"name": "skip", "params": params, "reason": reason}), flush=True)


def read_recipe_vars(path):
    """DEB_SOURCE, QUICK and EXTRA of a recipe (plain assignments at the top level)."""
    out = {}
    with open(path) as f:
        for line in f:
            for key in ("DEB_SOURCE", "QUICK", "EXTRA"):
                if line.startswith(key + "="):
                    out[key] = line.split("=", 1)[1].strip().strip("'\"")
    return out


def recipe_build_key(path):
    """What a recipe's builds depend on: bash's own listing of its functions but run_suite
    and run_workload (so without comments), the source package, and the variables those
    functions name."""
    script = ('set -euo pipefail; before=$(compgen -v); . "$1"; unset -f run_suite run_workload; '
              'declare -f; for v in $(compgen -v); do case "$v" in before|v) continue;; esac; '
              'grep -qx "$v" <<<"$before" || declare -p "$v"; done')
    r = subprocess.run(["bash", "-c", script, "recipe", path], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("reading the recipe %s: %s" % (path, r.stderr.strip()[-400:]))
    lines = r.stdout.splitlines(True)
    variables = [l for l in lines if l.startswith("declare -")]
    text = "".join(l for l in lines if not l.startswith("declare -"))
    for line in variables:
        name = line.split("=", 1)[0].split()[-1]
        if name == "DEB_SOURCE" or re.search(r"\$\{?%s\b" % name, text):
            text += line
    return text


def file_key(path):
    """What the builds depend on in a tool's file: its bytes, so that a rebuild that made the
    same file (a `make test` after a commit elsewhere) does not throw every build away."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return path + ":missing"


class Evaluation:
    def __init__(self, args):
        self.args = args
        self.src = args.source
        self.build = args.build
        self.cache = args.cache or os.path.join(self.build, "bench-data", "carat")
        self.exomem_cc = os.path.join(self.build, "exomem-cc")
        self.clang = args.clang
        self.start = time.monotonic()
        self.program_deadline = self.start + args.budget
        self.to_run = []
        self.cut = False   # did the program's share leave something out?
        self.runner = os.path.join(self.src, "bench", "carat", "program.sh")
        self.tool_key = "|".join(file_key(p) for p in (
            self.exomem_cc, os.path.join(self.build, "llvm", "libexomem-carat.so"),
            os.path.join(self.build, "src", "libexomem.a")))

    def left(self):
        return self.args.budget - (time.monotonic() - self.start)

    def env_for(self, mode, extra=None):
        cc, flag, parts, opt = MODES[mode]
        env = dict(os.environ)
        for k in ("EXOMEM_CARAT_PARTS", "EXOMEM_CARAT_GUARD_OPT", "EXOMEM_CARAT_STATS",
                  "EXOMEM_CARAT_MOVES", "EXOMEM_CARAT_REPORT"):
            env.pop(k, None)
        env["CC"] = self.exomem_cc if cc == "exomem-cc" else self.clang
        env["CFLAGS"] = ("-O2 -g " + flag).strip()
        env["LDFLAGS"] = flag
        env["JOBS"] = str(self.args.jobs)
        if parts:
            env["EXOMEM_CARAT_PARTS"] = parts
        if opt:
            env["EXOMEM_CARAT_GUARD_OPT"] = opt
        if mode == "asan":
            # Leaks are not what this run measures; stop at the first real error.
            env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=0"
        env.update(extra or {})
        return env

    def program_left(self):
        return self.program_deadline - time.monotonic()

    def step(self, recipe, action, tree, env, logname):
        """Run program.sh within the program's share of the budget; returns (ok, seconds,
        timed_out). A step that runs out of time is stopped with its whole process group."""
        t0 = time.monotonic()
        # Builds may use the whole section's time (they are cached for the next run); suites
        # and workloads the program's share.
        limit = max(30.0, self.left() if action == "build" else self.program_left())
        with open(os.path.join(tree, "..", logname), "w") as out:
            try:
                proc = subprocess.Popen([self.runner, recipe, action, tree], stdout=out,
                                        stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)
            except OSError as e:
                out.write("cannot run: %s\n" % e)
                return False, 0.0, False
            try:
                proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    try:
                        os.killpg(proc.pid, sig)
                    except ProcessLookupError:
                        pass
                    try:
                        proc.wait(timeout=10)
                        break
                    except subprocess.TimeoutExpired:
                        continue
                out.write("\nstopped after %.0f s: the program's share of the budget\n" % limit)
                return False, time.monotonic() - t0, True
        return proc.returncode == 0, time.monotonic() - t0, False

    def fetch(self, pkg):
        script = os.path.join(self.src, "bench", "carat", "fetch_source.sh")
        r = subprocess.run([script, pkg, self.cache], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("fetching %s: %s" % (pkg, r.stderr.strip()[-400:]))
        return r.stdout.strip().splitlines()[-1]

    def build_mode(self, name, recipe, recipe_key, pristine, mode):
        """The program built in mode (cached; recipe_key: recipe_build_key's text); returns
        (tree, seconds or None, stats lines)."""
        where = os.path.join(self.cache, "build", name)
        tree = os.path.join(where, mode)
        stamp = tree + ".stamp"
        # The plain and ASan builds use clang alone: a new runtime or plugin keeps them.
        tools = self.tool_key if MODES[mode][0] == "exomem-cc" else ""
        key = hashlib.sha256((recipe_key + tools + mode + self.clang).encode()).hexdigest()
        stats = tree + ".guards.jsonl"
        try:
            with open(stamp) as f:
                if f.read().strip() == key:
                    return tree, None, read_jsonl(stats)
        except OSError:
            pass
        shutil.rmtree(tree, ignore_errors=True)
        for p in (stamp, stats):
            if os.path.exists(p):
                os.remove(p)
        os.makedirs(where, exist_ok=True)
        shutil.copytree(pristine, tree, symlinks=True)
        env = self.env_for(mode, {"EXOMEM_CARAT_STATS": stats} if MODES[mode][0] == "exomem-cc" else None)
        log("%s: building %s" % (name, mode))
        ok, secs, late = self.step(recipe, "build", tree, env, mode + ".build.log")
        if not ok:
            raise RuntimeError("%s did not build in mode %s%s (log: %s.build.log)"
                               % (name, mode, " in its share of the time" if late else "", tree))
        with open(stamp, "w") as f:
            f.write(key + "\n")
        return tree, secs, read_jsonl(stats)

    def suite(self, name, recipe, tree, mode, rate=None):
        report = tree + ".report.jsonl"
        if os.path.exists(report):
            os.remove(report)
        extra = {"EXOMEM_CARAT_REPORT": report}
        if rate:
            extra["EXOMEM_CARAT_MOVES"] = str(rate)
        log("%s: suite, %s%s" % (name, mode, ", %d moves/s" % rate if rate else ""))
        ok, secs, late = self.step(recipe, "suite", tree, self.env_for(mode, extra),
                                   "%s%s.suite.log" % (mode, "-moves%d" % rate if rate else ""))
        params = {"program": name, "mode": mode, "moves_per_s": rate or 0}
        if late:
            self.cut_short(params, "the suite did not finish in the program's share of the time budget")
            return False
        emit("carat_suite_pass", "bool", 1 if ok else 0, params)
        emit("carat_suite_time", "s", round(secs, 3), params)
        lines = read_jsonl(report)
        if rate and lines:
            moves = sum(x.get("moves", 0) for x in lines)
            refused = sum(x.get("moves_refused", 0) for x in lines)
            emit("carat_suite_moves", "moves", moves, params)
            emit("carat_suite_moves_refused", "moves", refused, params)
            emit("carat_suite_pinned", "allocations",
                 sum(x.get("pinned", 0) for x in lines), params)
        return ok

    def workload(self, name, recipe, tree, mode, rate=None, report=None, rnd=1):
        """One timed run of the workload: (ok, timed out, seconds, vmstat deltas, log). Each
        run has a log of its own (mode, rate, round), so that a failed run's is kept."""
        extra = {}
        if report:
            extra["EXOMEM_CARAT_REPORT"] = report
        if rate:
            extra["EXOMEM_CARAT_MOVES"] = str(rate)
        logname = "%s%s.workload%d.log" % (mode, "-moves%d" % rate if rate else "", rnd)
        before = vmstat()
        ok, secs, late = self.step(recipe, "workload", tree, self.env_for(mode, extra), logname)
        after = vmstat()
        return (ok, late, secs, {k: after.get(k, 0) - before.get(k, 0) for k in VMSTAT_KEYS},
                os.path.normpath(os.path.join(tree, "..", logname)))

    def program(self, recipe):
        name = os.path.basename(recipe)[:-3]
        info = read_recipe_vars(recipe)
        pkg = info.get("DEB_SOURCE", name)
        pristine = self.fetch(pkg)
        recipe_key = recipe_build_key(recipe)
        trees = {}
        for mode in MODES:
            if self.left() < 60:
                skip({"program": name, "mode": mode}, "the section's time budget ran out")
                continue
            tree, secs, stats = self.build_mode(name, recipe, recipe_key, pristine, mode)
            trees[mode] = tree
            if secs is not None:
                emit("carat_build_time", "s", round(secs, 2), {"program": name, "mode": mode})
            if mode in ("guards-noopt", "guards"):
                emit_guard_counts(name, mode, stats)
        if self.args.build_only:
            return
        # The program's share of what the builds left (builds, cached for the next run, may
        # take more): in proportion to what each program still to run took last time, as
        # sqlite3 and Lua need several times bzip2's; equal parts on a first run.
        start = time.monotonic()
        self.program_deadline = start + self.left() * self.share(name)
        for mode in (m for m in trees if m in SUITE_MODES):
            if self.program_left() < 20:
                self.cut_short({"program": name, "mode": mode}, "the program's share of the time budget ran out")
                continue
            self.suite(name, recipe, trees[mode], mode)
        # What a short budget cuts last comes first: three rounds of the workloads (the
        # overheads need every mode), the suites under moves the issue asks for (the
        # tracking-and-guards build at every rate), the remaining rounds, and the escape
        # log's build under moves at the highest rate.
        first = min(self.args.repeats, BASE_ROUNDS)
        self.time_workloads(name, recipe, trees, 0, first)
        self.moved_suites(name, recipe, trees, [("carat", r) for r in self.rates])
        self.time_workloads(name, recipe, trees, first, self.args.repeats)
        self.moved_suites(name, recipe, trees, [("track", max(self.rates))])
        self.remember_time(name, time.monotonic() - start)

    def moved_suites(self, name, recipe, trees, moved):
        """The suite of each (mode, rate) of moved, while the program's share lasts."""
        for mode, rate in moved:
            if mode not in trees:
                continue
            if self.program_left() < 20:
                self.cut_short({"program": name, "mode": mode, "moves_per_s": rate},
                               "the program's share of the time budget ran out")
                continue
            self.suite(name, recipe, trees[mode], mode, rate)

    def cut_short(self, params, reason):
        self.cut = True
        skip(params, reason)

    def last_time_path(self, name):
        return os.path.join(self.cache, "build", name, "last-run-seconds")

    def last_time(self, name):
        try:
            with open(self.last_time_path(name)) as f:
                secs = float(f.read())
        except (OSError, ValueError):
            return None
        return secs if secs >= 1.0 else None

    def share(self, name):
        """name's part of the time left: its last run's time over the sum of those of the
        programs still to run (name among them); a program never run counts as the mean."""
        last = {p: self.last_time(p) for p in self.to_run}
        known = [t for t in last.values() if t]
        mean = sum(known) / len(known) if known else 1.0
        return (last[name] or mean) / sum(t or mean for t in last.values())

    def remember_time(self, name, secs):
        """The time name's suites and workloads took after its builds. A run its share cut
        short says less than it needed: the larger of it and the last is kept then, and
        nothing when there is no last (a program cut before it ran, remembered as taking
        nothing, had a share of almost nothing in every run after)."""
        if self.cut:
            last = self.last_time(name)
            if last is None:
                return
            secs = max(secs, last)
        try:
            with open(self.last_time_path(name), "w") as f:
                f.write("%.0f\n" % secs)
        except OSError:
            pass

    def time_workloads(self, name, recipe, trees, first, last):
        """Rounds first..last-1 (from 0) of the workloads; the runtime's reports of round 0
        give the counts (escapes, moves, the table's memory)."""
        # Modes interleaved round by round, so that a slow spell of this shared machine
        # falls on all of them.
        runs = [(m, None) for m in trees] + [("carat", r) for r in self.rates if "carat" in trees]
        reports = {}
        out_of_time = False
        for rep in range(first, last):
            if out_of_time:
                break
            log("%s: workloads, round %d of %d (%d runs)" % (name, rep + 1, self.args.repeats,
                                                             len(runs)))
            for mode, rate in runs:
                if self.program_left() < 10:
                    self.cut_short({"program": name, "round": rep + 1},
                         "the program's share of the time budget ran out in the workloads")
                    out_of_time = True
                    break
                report = None
                if rep == 0 and MODES[mode][0] == "exomem-cc":
                    report = trees[mode] + ".work%s.jsonl" % (rate or "")
                    if os.path.exists(report):
                        os.remove(report)
                    reports[(mode, rate)] = report
                ok, late, secs, vm, wlog = self.workload(name, recipe, trees[mode], mode, rate,
                                                         report, rep + 1)
                params = {"program": name, "mode": mode}
                if rate:
                    params["moves_per_s"] = rate
                if late:
                    self.cut_short(params, "the workload did not finish in the program's share of the "
                         "time budget (%.0f s)" % secs)
                    continue
                # Whether the workload's run passed: a failure under moves is a wrong result
                # the targets count, not only a missing time.
                emit("carat_workload_pass", "bool", 1 if ok else 0, params)
                if not ok:
                    skip(params, "the workload failed in round %d (log: %s)" % (rep + 1, wlog))
                    continue
                if rate:
                    emit("carat_workload_moves", "s", round(secs, 4), params, "carat_workload",
                         {"program": name, "mode": "carat"})
                else:
                    emit("carat_workload", "s", round(secs, 4), params,
                         None if mode == "base" else "carat_workload",
                         None if mode == "base" else {"program": name, "mode": "base"})
                if mode == "base" and not rate:
                    for k, v in vm.items():
                        emit("carat_vmstat_rate", "/s", round(v / secs, 1) if secs > 0 else 0,
                             {"program": name, "counter": k})
        for (mode, rate), report in reports.items():
            lines = read_jsonl(report)
            if not lines:
                continue
            params = {"program": name, "mode": mode}
            if rate:
                params["moves_per_s"] = rate
                emit("carat_workload_moves_done", "moves",
                     sum(x.get("moves", 0) for x in lines), params)
                emit("carat_workload_moves_refused", "moves",
                     sum(x.get("moves_refused", 0) for x in lines), params)
                # Why, by the causes the runtime names in its report (src/carat/report.c).
                causes = {}
                for x in lines:
                    for cause, n in x.get("refused_by", {}).items():
                        causes[cause] = causes.get(cause, 0) + n
                for cause, n in causes.items():
                    emit("carat_workload_moves_refused_by", "moves", n, dict(params, cause=cause))
                continue
            if mode in ("guards-noopt", "guards"):
                # Guards that left the inline fast path (one region: none should)
                emit("carat_guard_slow", "guards", sum(x.get("guard_slow", 0) for x in lines),
                     params)
                continue
            if mode != "track":
                continue
            emit("carat_allocations", "allocations", sum(x.get("allocs_total", 0) for x in lines), params)
            emit("carat_escapes", "escapes", sum(x.get("escapes_total", 0) for x in lines), params)
            top = max(lines, key=lambda x: x.get("table_peak_bytes", 0))
            emit("carat_table_peak", "B", top.get("table_peak_bytes", 0), params)
            emit("carat_table_process_rss", "B", top.get("peak_rss_bytes", 0), params)
            hist = [0] * 16
            for x in lines:
                for i, v in enumerate(x.get("escape_hist", [])[:16]):
                    hist[i] += v
            for i, v in enumerate(hist):
                emit("carat_escape_hist", "allocations", v, dict(params, bucket=i))

    def run(self):
        # The programs the issue names first; an extra one (EXTRA=yes: minimap2, the
        # multi-threaded one) after them, so that a budget cut by a first run's builds
        # falls on it (a full run that rebuilt everything left zlib out once it was added).
        progs = sorted((p for p in os.listdir(self.recipes) if p.endswith(".sh")),
                       key=lambda p: (read_recipe_vars(os.path.join(self.recipes, p))
                                      .get("EXTRA") == "yes", p))
        chosen = []
        for p in progs:
            path = os.path.join(self.recipes, p)
            if self.args.programs and p[:-3] not in self.args.programs:
                continue
            if self.args.quick and not self.args.programs and read_recipe_vars(path).get("QUICK") != "yes":
                continue
            chosen.append(path)
        rc = 0
        for i, recipe in enumerate(chosen):
            name = os.path.basename(recipe)[:-3]
            self.to_run = [os.path.basename(r)[:-3] for r in chosen[i:]]
            self.cut = False
            log("[%d/%d] %s (%.0f s of the %d s budget left)" % (i + 1, len(chosen), name,
                                                                  self.left(), self.args.budget))
            try:
                self.program(recipe)
            except RuntimeError as e:
                skip({"program": name}, str(e))
                log(str(e))
                rc = 1
        left_out = [os.path.basename(p)[:-3] for p in
                    (os.path.join(self.recipes, q) for q in progs) if p not in chosen]
        if left_out:
            skip({"programs": " ".join(left_out)},
                 "not in this run (%s)" % ("the quick form runs two programs"
                                           if self.args.quick else "not asked for"))
        return rc


def read_jsonl(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


def emit_guard_counts(name, mode, stats):
    """Table 1: the static guard counts of the program's own modules (configure's test
    programs left out), summed."""
    keys = ("guard_loads", "guard_stores", "guard_calls", "guard_ranges", "guards_naive",
            "opt_value_range", "opt_redundant", "opt_hoisted", "opt_merged", "opt_coalesced",
            "opt_versioned", "guards_final")
    total = {k: 0 for k in keys}
    modules = 0
    for s in stats:
        if "conftest" in s.get("module", "") or not s.get("guards"):
            continue
        modules += 1
        for k in keys:
            total[k] += s.get(k, 0)
    if not modules:
        return
    for k, v in total.items():
        emit("carat_guards", "guards", v, {"program": name, "mode": mode, "count": k})


def vmstat():
    out = {}
    try:
        with open("/proc/vmstat") as f:
            for line in f:
                k, _, v = line.partition(" ")
                if k in VMSTAT_KEYS:
                    out[k] = int(v)
    except OSError:
        pass
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="exomem's build directory")
    ap.add_argument("--source", required=True, help="exomem's source directory")
    ap.add_argument("--cache", help="where sources and builds are kept (default <build>/bench-data/carat)")
    ap.add_argument("--clang", default="clang-19")
    ap.add_argument("--quick", action="store_true", help="two programs, two move rates, two repeats")
    ap.add_argument("--programs", nargs="*", help="recipe names (default: all, or the quick pair)")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--budget", type=int, default=None,
                    help="seconds for the whole run (default 2600, quick 1200)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--build-only", action="store_true",
                    help="fetch and build every mode into the cache, run nothing (a later run "
                         "then spends its budget on suites and workloads alone)")
    args = ap.parse_args()
    # The recipes run in the programs' own trees: relative paths would name nothing there.
    args.build, args.source = os.path.abspath(args.build), os.path.abspath(args.source)
    if args.cache:
        args.cache = os.path.abspath(args.cache)
    if args.repeats is None:
        # Five rounds: with workloads of about 2 s, one program's plain time ranged by
        # half its median within three rounds on this shared machine (jq 1.47-2.48 s), and
        # the whole section with three took 25 of its 45 minutes.
        args.repeats = 2 if args.quick else 5
    if args.budget is None:
        args.budget = 1200 if args.quick else 2600
    ev = Evaluation(args)
    ev.recipes = os.path.join(args.source, "bench", "carat", "programs")
    ev.rates = QUICK_RATES if args.quick else FULL_RATES
    for tool in (ev.exomem_cc, shutil.which(args.clang)):
        if not tool or not os.path.exists(tool):
            skip({}, "%s not found: build exomem with the CARAT plugin (llvm-19-dev)" % (tool or args.clang))
            return 77
    print(json.dumps({"name": "carat_machine", "unit": "cpus", "value": os.cpu_count(),
                      "params": {}}), flush=True)
    return ev.run()


if __name__ == "__main__":
    sys.exit(main())
