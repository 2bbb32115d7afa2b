#!/usr/bin/env bash
# `exomem run --heap-segment`: unmodified programs with their malloc heap in one segment.
# exomem_heap_probe checks the whole malloc family, threads, fork and ENOMEM from inside;
# Debian programs (true, sort, sh, xz) must behave as without the launcher; exit statuses pass
# through; nothing is left in the registry or /dev/shm. The 2M and 1G runs (hpcc on a 1G heap)
# need root (for hugetlbfs mounts and huge page pools, undone at the end); each is skipped,
# saying why, where it cannot run.
# Needs EXOMEM_BIN and EXOMEM_BUILD (set by CTest).
set -u

if [ -z "${EXOMEM_BIN:-}" ] || [ ! -x "$EXOMEM_BIN" ] || [ -z "${EXOMEM_BUILD:-}" ]; then
    echo "SKIP: EXOMEM_BIN and EXOMEM_BUILD must name the exomem binary and build" >&2
    exit 77
fi
if grep -q '^EXOMEM_SANITIZE:BOOL=ON' "$EXOMEM_BUILD/CMakeCache.txt" 2>/dev/null; then
    # An instrumented program brings its own allocator, which a preloaded malloc cannot replace.
    echo "SKIP: sanitizer build; the heap preload library cannot serve instrumented programs" >&2
    exit 77
fi
X=$EXOMEM_BIN
PROBE=$EXOMEM_BUILD/exomem_heap_probe
export EXOMEM_HEAP_PRELOAD=$EXOMEM_BUILD/libexomem_heap.so
for f in "$PROBE" "$EXOMEM_HEAP_PRELOAD"; do
    [ -e "$f" ] || { echo "FAIL: $f is missing" >&2; exit 1; }
done
unset EXOMEM_ROOT
TMP=$(mktemp -d) || exit 1
# Huge page mounts made and pools grown by huge_setup, undone at exit: "dir pool old" each.
HUGE_UNDO=()
cleanup() {
    local u dir pool old
    for u in "${HUGE_UNDO[@]}"; do
        read -r dir pool old <<<"$u"
        [ "$pool" != - ] && echo "$old" >"$pool"
        umount "$dir" && rmdir "$dir"
    done
    rm -rf "$TMP" "${ROOT:-}"
}
trap cleanup EXIT

failures=0
fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}
runs_before=$(ls -d /dev/shm/exomem-run-* 2>/dev/null | sort)

# expect RC ARGS...: `exomem ARGS` exits RC; output in $TMP/out and $TMP/err.
expect() {
    local want=$1
    shift
    "$X" "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || fail "exomem $* exited $rc, expected $want: $(cat "$TMP/err")"
}

# The malloc family, 4 threads and fork from inside, served from a private registry.
expect 0 run --heap-segment 64M -- "$PROBE"
grep -qx 'probe: ok' "$TMP/out" || fail "probe did not report ok: $(cat "$TMP/out" "$TMP/err")"

# A program that wants more than the segment gets ENOMEM (the probe checks the errno).
expect 0 run --heap-segment 8M -- "$PROBE" --exhaust
grep -Eq '^ENOMEM after [1-7] MiB$' "$TMP/out" || fail "exhaust: $(cat "$TMP/out" "$TMP/err")"

# Debian programs: same results as without the launcher; the heap segment really is mapped.
expect 0 run --heap-segment 16M -- /bin/true
seq 20000 | awk '{ print ($1 * 7919) % 20011, "line", $1 }' >"$TMP/in"
sort "$TMP/in" >"$TMP/want"
expect 0 run --heap-segment 32M -- sort "$TMP/in"
cmp -s "$TMP/out" "$TMP/want" || fail "sort through the launcher gave different output"
expect 0 run --heap-segment 16M --base 0x610000000000 -- sh -c \
    'grep -q "^610000000000-610001000000 rw-p" /proc/$$/maps && [ "$EXOMEM_HEAP_SIZE" = 16777216 ]'

# Who gets the heap: by default the launched program only (sh here; the grep it starts runs
# on glibc), with --heap-in all every program it starts, with --heap-in NAME the named ones.
HEAP_LINE='^600000000000-600001000000 rw-p'
expect 0 run --heap-segment 16M -- sh -c "grep -q '$HEAP_LINE' /proc/\$\$/maps && ! grep -q '$HEAP_LINE' /proc/self/maps"
expect 0 run --heap-segment 16M --heap-in all -- sh -c "grep -q '$HEAP_LINE' /proc/self/maps"
expect 0 run --heap-segment 16M --heap-in grep,cat -- sh -c "! grep -q '$HEAP_LINE' /proc/\$\$/maps && grep -q '$HEAP_LINE' /proc/self/maps"
expect 0 run --heap-segment 16M -- sh -c '[ -z "$LD_PRELOAD" ] && [ -n "$EXOMEM_HEAP_SEGMENT" ]'
LD_PRELOAD=libc.so.6 expect 0 run --heap-segment 16M -- sh -c '[ "$LD_PRELOAD" = libc.so.6 ]'

# xz (LZMA's match finder: some 90 MiB of malloc'd tables at -6) compresses exactly as without
# the launcher, and its output decompresses (through the launcher too) to the input.
if command -v xz >/dev/null 2>&1; then
    xz -6 -T1 -c "$TMP/in" >"$TMP/want.xz" || fail "plain xz failed"
    expect 0 run --heap-segment 256M -- xz -6 -T1 -c "$TMP/in"
    cmp -s "$TMP/out" "$TMP/want.xz" || fail "xz through the launcher gave different output"
    cp "$TMP/out" "$TMP/got.xz"
    expect 0 run --heap-segment 64M -- xz -dc "$TMP/got.xz"
    cmp -s "$TMP/out" "$TMP/in" || fail "xz -d through the launcher did not give the input back"
    # Too small a heap: xz reports the allocation failure and fails cleanly, no crash.
    expect 1 run --heap-segment 16M -- xz -6 -T1 -c "$TMP/in"
    grep -qi "cannot allocate memory" "$TMP/err" || fail "xz in 16M: $(cat "$TMP/err")"
else
    echo "SKIP (xz part): xz is not installed" >&2
fi

# Exit statuses pass through; a program killed by signal N gives 128+N.
expect 3 run --heap-segment 4M -- sh -c 'exit 3'
expect 137 run --heap-segment 4M -- sh -c 'kill -9 $$'
expect 127 run --heap-segment 4M -- "$TMP/no-such-program"

# Usage errors change nothing.
expect 2 run -- /bin/true
expect 2 run --heap-segment 4M
expect 2 run --heap-segment 4M --page 3k -- /bin/true
expect 2 run --heap-segment 4M --base 0x600000000800 -- /bin/true
expect 2 run --heap-segment 4M --heap-in , -- /bin/true
expect 2 run --heap-segment 4M --heap-in sh,,cat -- /bin/true
expect 2 run --heap-segment 4M --heap-in /bin/sh -- /bin/true
expect 0 run --help
grep -q -- '--heap-segment SIZE' "$TMP/out" || fail "run --help does not describe --heap-segment"

# With EXOMEM_ROOT given, the segment is made there and deleted afterwards.
ROOT=$(mktemp -d /dev/shm/exomem-test-launcher-XXXXXX) || exit 1
EXOMEM_ROOT=$ROOT expect 0 run --heap-segment 8M -- sh -c '[ -L "$EXOMEM_ROOT/names/seg:$EXOMEM_HEAP_SEGMENT" ]'
[ -z "$(ls -A "$ROOT/names" 2>/dev/null)" ] || fail "segment left in EXOMEM_ROOT: $(ls "$ROOT/names")"
[ -z "$(ls -A "$ROOT/segs" 2>/dev/null)" ] || fail "segment data left in EXOMEM_ROOT"

# huge_setup PAGE(2M|1G) PAGES: mount hugetlbfs for PAGE and grow its pool until PAGES pages
# are free and unreserved (both undone at exit); sets HUGE_MOUNT to the mount, or prints a
# SKIP line and fails. Called directly, never in $(...): the undo list must reach cleanup.
huge_setup() {
    local page=$1 pages=$2 kb sys dir old avail
    kb=$([ "$page" = 2M ] && echo 2048 || echo 1048576)
    sys=/sys/kernel/mm/hugepages/hugepages-${kb}kB
    if [ "$(id -u)" -ne 0 ] || [ ! -w "$sys/nr_hugepages" ]; then
        echo "SKIP ($page part): needs root for a hugetlbfs mount and a $page huge page pool" >&2
        return 1
    fi
    dir=$(mktemp -d "/tmp/exomem-launcher-$page.XXXXXX")
    if ! mount -t hugetlbfs -o "pagesize=$page" none "$dir"; then
        rmdir "$dir"
        echo "SKIP ($page part): cannot mount hugetlbfs" >&2
        return 1
    fi
    old=$(cat "$sys/nr_hugepages")
    HUGE_UNDO+=("$dir $sys/nr_hugepages $old")
    avail=$(($(cat "$sys/free_hugepages") - $(cat "$sys/resv_hugepages")))
    [ "$avail" -lt "$pages" ] && echo $((old + pages - avail)) >"$sys/nr_hugepages" 2>/dev/null
    avail=$(($(cat "$sys/free_hugepages") - $(cat "$sys/resv_hugepages")))
    if [ "$avail" -lt "$pages" ]; then
        echo "SKIP ($page part): the kernel made only $avail of $pages free $page pages" \
             "(memory fragmented?)" >&2
        return 1
    fi
    HUGE_MOUNT=$dir
}

# 2M pages: the heap (8 pages), the probe's forked child's copies, and some slack.
if huge_setup 2M 24; then
    HUGE_2M=$HUGE_MOUNT
    EXOMEM_HUGETLBFS_2M=$HUGE_2M expect 0 run --heap-segment 16M --page 2m -- "$PROBE"
    EXOMEM_HUGETLBFS_2M=$HUGE_2M expect 0 run --heap-segment 16M --page 2m -- sh -c \
        "awk '/^600000000000-/ { f = 1 } f && /KernelPageSize/ { print \$2; exit }' /proc/\$\$/smaps"
    [ "$(cat "$TMP/out")" = 2048 ] || fail "2M heap is not on 2M pages: $(cat "$TMP/out")"
    [ -z "$(ls -A "$HUGE_2M")" ] || fail "files left in hugetlbfs: $(ls "$HUGE_2M")"
fi

# 1G pages. On the kernel measured here fork() now and then leaves a private 1 GiB hugetlb
# page out of the child's page table, and the child's first touch maps a fresh zero page:
# the child runs on an empty heap. Under hpcc that child is Open MPI's, about to exec orted;
# it followed the dynamic linker's lists into the zeroed heap and crashed, and MPI_Init
# failed with "Local abort before MPI_INIT". The preload library now checks each fork and
# copies missing pages into the child (tools/heap_preload/fork_repair.c). Two free pages (the
# heap and one copy) must be enough, every time.
if huge_setup 1G 2; then
    HUGE_1G=$HUGE_MOUNT
    export EXOMEM_HUGETLBFS_1G=$HUGE_1G
    expect 0 run --heap-segment 1G --page 1g -- "$PROBE" --forks 40
    grep -qx 'forks: 40 of 40 saw the heap' "$TMP/out" ||
        fail "1G heap: forked children did not all see it: $(cat "$TMP/out" "$TMP/err")"
    # What the kernel does without the check (information only: a fixed kernel loses none).
    EXOMEM_HEAP_FORK_CHECK=0 "$X" run --heap-segment 1G --page 1g -- "$PROBE" --forks 40 \
        2>/dev/null | sed 's/^/without the fork check, /' >&2
    if ! command -v hpcc >/dev/null 2>&1; then
        echo "SKIP (1G hpcc part): hpcc is not installed (Debian package hpcc)" >&2
    else
        mkdir "$TMP/hpcc"
        printf '%s\n' "HPLinpack benchmark input file" "exomem test_launcher" HPL.out 8 \
            "1 # of problems sizes (N)" "600 Ns" "1 # of NBs" "80 NBs" "0 PMAP" \
            "1 # of process grids (P x Q)" "1 Ps" "1 Qs" "16.0 threshold" "1 # of panel fact" \
            "2 PFACTs" "1 # of recursive stopping criterium" "4 NBMINs" \
            "1 # of panels in recursion" "2 NDIVs" "1 # of recursive panel fact." "1 RFACTs" \
            "1 # of broadcast" "1 BCASTs" "1 # of lookahead depth" "1 DEPTHs" "2 SWAP" \
            "64 swapping threshold" "0 L1 in" "0 U  in" "1 Equilibration" \
            "8 memory alignment in double" "##### separator #####" \
            "0 Number of additional problem sizes for PTRANS" "600 values of N" \
            "0 number of additional blocking sizes for PTRANS" "40 values of NB" \
            >"$TMP/hpcc/hpccinf.txt"
        for i in 1 2 3 4 5; do
            rm -f "$TMP/hpcc/hpccoutf.txt"
            (cd "$TMP/hpcc" && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
                "$X" run --heap-segment 1G --page 1g -- hpcc) >"$TMP/out" 2>"$TMP/err"
            rc=$?
            if [ "$rc" -ne 0 ] || ! grep -q '^Success=1' "$TMP/hpcc/hpccoutf.txt"; then
                fail "hpcc with a 1G heap on 1G pages, run $i: exit $rc: $(tail -4 "$TMP/err")"
                break
            fi
        done
    fi
    unset EXOMEM_HUGETLBFS_1G
    [ -z "$(ls -A "$HUGE_1G")" ] || fail "files left in hugetlbfs: $(ls "$HUGE_1G")"
fi

runs_after=$(ls -d /dev/shm/exomem-run-* 2>/dev/null | sort)
[ "$runs_before" = "$runs_after" ] || fail "private registries left in /dev/shm: $runs_after"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
fi
echo "all launcher checks passed"
