#!/usr/bin/env bash
# `exomem run --heap-segment`: unmodified programs with their malloc heap in one segment.
# exomem_heap_probe checks the whole malloc family, threads, fork and ENOMEM from inside;
# Debian programs (true, sort, sh, xz) must behave as without the launcher; exit statuses pass
# through; nothing is left in the registry or /dev/shm. The 2M-page run needs root (for a
# hugetlbfs mount and a huge page pool, both undone at the end) and is skipped otherwise.
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
HUGE_DIR= POOL= POOL_OLD=
cleanup() {
    [ -n "$POOL" ] && echo "$POOL_OLD" >"$POOL"
    [ -n "$HUGE_DIR" ] && umount "$HUGE_DIR" && rmdir "$HUGE_DIR"
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
    'grep -q "^610000000000-610001000000 rw-p" /proc/self/maps && [ "$EXOMEM_HEAP_SIZE" = 16777216 ]'

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
expect 0 run --help
grep -q -- '--heap-segment SIZE' "$TMP/out" || fail "run --help does not describe --heap-segment"

# With EXOMEM_ROOT given, the segment is made there and deleted afterwards.
ROOT=$(mktemp -d /dev/shm/exomem-test-launcher-XXXXXX) || exit 1
EXOMEM_ROOT=$ROOT expect 0 run --heap-segment 8M -- sh -c '[ -L "$EXOMEM_ROOT/names/seg:$EXOMEM_HEAP_SEGMENT" ]'
[ -z "$(ls -A "$ROOT/names" 2>/dev/null)" ] || fail "segment left in EXOMEM_ROOT: $(ls "$ROOT/names")"
[ -z "$(ls -A "$ROOT/segs" 2>/dev/null)" ] || fail "segment data left in EXOMEM_ROOT"

# 2M pages: a temporary hugetlbfs mount and pool (root only).
POOL_PATH=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
if [ "$(id -u)" -eq 0 ] && [ -w "$POOL_PATH" ]; then
    HUGE_DIR=$(mktemp -d /tmp/exomem-launcher-huge.XXXXXX)
    if mount -t hugetlbfs -o pagesize=2M none "$HUGE_DIR"; then
        POOL_OLD=$(cat "$POOL_PATH")
        POOL=$POOL_PATH
        # The heap (8 pages), the probe's forked child's copies, and some slack.
        echo $((POOL_OLD + 24)) >"$POOL"
        if [ "$(cat "$POOL")" -ge $((POOL_OLD + 24)) ]; then
            EXOMEM_HUGETLBFS_2M=$HUGE_DIR expect 0 run --heap-segment 16M --page 2m -- "$PROBE"
            EXOMEM_HUGETLBFS_2M=$HUGE_DIR expect 0 run --heap-segment 16M --page 2m -- sh -c \
                "awk '/^600000000000-/ { f = 1 } f && /KernelPageSize/ { print \$2; exit }' /proc/self/smaps"
            [ "$(cat "$TMP/out")" = 2048 ] || fail "2M heap is not on 2M pages: $(cat "$TMP/out")"
            [ -z "$(ls -A "$HUGE_DIR")" ] || fail "files left in hugetlbfs: $(ls "$HUGE_DIR")"
        else
            echo "SKIP (2M part): could not grow the 2M huge page pool" >&2
        fi
    else
        rmdir "$HUGE_DIR"
        HUGE_DIR=
        echo "SKIP (2M part): cannot mount hugetlbfs" >&2
    fi
else
    echo "SKIP (2M part): needs root for a hugetlbfs mount and a 2M huge page pool" >&2
fi

runs_after=$(ls -d /dev/shm/exomem-run-* 2>/dev/null | sort)
[ "$runs_before" = "$runs_after" ] || fail "private registries left in /dev/shm: $runs_after"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
fi
echo "all launcher checks passed"
