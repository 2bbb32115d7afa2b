#!/usr/bin/env bash
# apps/samjmp against samtools 1.16 on small files of Debian's samtools-test and htslib-test:
# for each file, in a VAS store and in an mmap store, separate processes load, sort and index
# it, and flagstat, idxstats, the sorted records (samjmp view against samtools view of samtools
# sort's output; also sorted by name, against samtools sort -n) and pileup (against samtools
# depth -a) must be identical to samtools'. Then a
# load, a sort and an index are each stopped half-way and killed with -9: the stages after it
# must refuse with a message naming the stage to run, the lock must be free, and running the
# stage again must give the same results in the same space. Readers run side by side, and a
# writer waits for them.
# Needs EXOMEM_BUILD (set by CTest); uses its own registry and store directory under /dev/shm.
set -u

SJ=${EXOMEM_BUILD:-}/apps/samjmp/samjmp
skip() {
    # Under CI the packages are installed by scripts/install-deps.sh: missing is a failure.
    if [ "${CI:-}" = true ]; then echo "FAIL: $*" >&2; exit 1; fi
    echo "SKIP: $*" >&2
    exit 77
}
[ -x "$SJ" ] || skip "no samjmp binary at $SJ (htslib missing at configure time?)"
command -v samtools >/dev/null || skip "samtools is not installed"
TESTDAT=/usr/share/samtools/test
[ -d "$TESTDAT" ] || skip "samtools-test is not installed"

EXOMEM_ROOT=$(mktemp -d /dev/shm/exomem-samjmp-XXXXXX) || exit 1
export EXOMEM_ROOT
TMP=$(mktemp -d /dev/shm/samjmp-test-XXXXXX) || exit 1
MMAP_DIR=$TMP/mmap
mkdir -p "$MMAP_DIR"
stopped_pid=
cleanup() {
    [ -n "$stopped_pid" ] && kill -9 "$stopped_pid" 2>/dev/null
    "$SJ" drop st >/dev/null 2>&1
    rm -rf "$EXOMEM_ROOT" "$TMP"
}
trap cleanup EXIT
failures=0
fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# Files with several references, unmapped reads, equal positions on both strands, duplicates
# (mpileup.1), QC failures (depad), supplementary records (fast_collate, bam2fq), reads past
# the end of their reference (consen1), BAM input, a BAM header without @SQ text (no_hdr_sq_1).
# Each reference is short: pileup prints every position of it.
FILES="$TESTDAT/dat/mpileup.1.sam $TESTDAT/dat/mpileup.2.sam $TESTDAT/dat/test_input_1_a.bam
$TESTDAT/dat/test_input_1_b.sam $TESTDAT/fixmate/1_coord_sort.sam $TESTDAT/dat/view.001.sam
$TESTDAT/dat/depad.001p.sam $TESTDAT/collate/fast_collate.sam $TESTDAT/dat/bam2fq.001.sam
$TESTDAT/consensus/consen1.sam /usr/share/htslib-test/test/no_hdr_sq_1.bam"

# expect_same WHAT FILE1 FILE2
expect_same() {
    cmp -s "$2" "$3" || fail "$1 differs from samtools': $(diff "$2" "$3" | head -5)"
}

# samtools' answers for FILE in $TMP/want.*
samtools_answers() {
    samtools sort -o "$TMP/sorted.bam" "$1" 2>/dev/null && samtools index "$TMP/sorted.bam" || return 1
    samtools flagstat "$1" >"$TMP/want.flagstat"
    samtools idxstats "$TMP/sorted.bam" >"$TMP/want.idxstats"
    samtools view "$TMP/sorted.bam" >"$TMP/want.view"
    samtools depth -a "$TMP/sorted.bam" >"$TMP/want.depth"
    samtools sort -n -o "$TMP/byname.bam" "$1" 2>/dev/null &&
        samtools view "$TMP/byname.bam" >"$TMP/want.byname"
}

# check_store ARGS...: samjmp ARGS' answers against $TMP/want.*
check_store() {
    "$SJ" "$@" flagstat st >"$TMP/got.flagstat" || fail "flagstat $*"
    "$SJ" "$@" idxstats st >"$TMP/got.idxstats" || fail "idxstats $*"
    "$SJ" "$@" view st >"$TMP/got.view" || fail "view $*"
    "$SJ" "$@" pileup st >"$TMP/got.depth" || fail "pileup $*"
    for what in flagstat idxstats view depth; do
        expect_same "$what ($* $f)" "$TMP/got.$what" "$TMP/want.$what"
    done
}

# set_opts vas|mmap: samjmp's options for that kind of store, in $opts (1 MiB chunks, so
# that records spread over several).
set_opts() {
    opts=(--chunk-mib 1)
    if [ "$1" = mmap ]; then opts+=(--mmap "$MMAP_DIR"); fi
}

checked=0
for f in $FILES; do
    [ -f "$f" ] || { echo "note: $f is not installed" >&2; continue; }
    samtools_answers "$f" || { fail "samtools could not sort and index $f"; continue; }
    for variant in vas mmap; do
        set_opts $variant
        # Each stage its own process; the next one finds the records where the last left them.
        "$SJ" "${opts[@]}" load "$f" st || { fail "load $f ($variant)"; continue; }
        "$SJ" "${opts[@]}" sort st || fail "sort $f ($variant)"
        "$SJ" "${opts[@]}" index st || fail "index $f ($variant)"
        check_store "${opts[@]}"
        # By name (samtools sort -n); pileup then wants the coordinate order back.
        "$SJ" "${opts[@]}" sort -n st || fail "sort -n $f ($variant)"
        "$SJ" "${opts[@]}" view st >"$TMP/got.byname" || fail "view after sort -n ($variant)"
        expect_same "records sorted by name ($variant $f)" "$TMP/got.byname" "$TMP/want.byname"
        "$SJ" "${opts[@]}" pileup st >/dev/null 2>"$TMP/err" &&
            fail "pileup of records sorted by name succeeded ($variant)"
        "$SJ" "${opts[@]}" drop st || fail "drop ($variant)"
        checked=$((checked + 1))
    done
done
[ $checked -ge 8 ] || fail "only $checked file/store pairs could be checked"

# A store larger than one chunk: records of all the files above, loaded into 1 MiB chunks.
big=$TMP/big.sam
{ samtools view -H "$TESTDAT/dat/mpileup.1.sam"; for i in $(seq 1 12); do
    samtools view "$TESTDAT/dat/mpileup.1.sam" | sed "s/^/r$i./"; done; } >"$big"
samtools_answers "$big" || fail "samtools on $big"
for variant in vas mmap; do
    set_opts $variant
    "$SJ" "${opts[@]}" load "$big" st && "$SJ" "${opts[@]}" sort st &&
        "$SJ" "${opts[@]}" index st || fail "pipeline on $big ($variant)"
    chunks=$("$SJ" "${opts[@]}" info st | awk '$1 == "chunks" { print $2 }')
    [ "${chunks:-0}" -ge 2 ] || fail "$big took ${chunks:-?} chunks, expected at least 2 ($variant)"
    check_store "${opts[@]}"
done

# wait_stopped PID: until the process stops itself (SAMJMP_STALL) or exits.
wait_stopped() {
    for _ in $(seq 1 200); do
        state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
        [ "$state" = T ] && return 0
        sleep 0.05
    done
    return 1
}

# kill_stage STAGE ARGS...: run samjmp ARGS with SAMJMP_STALL=STAGE, kill -9 it where it stops.
kill_stage() {
    local stage=$1
    shift
    SAMJMP_STALL=$stage "$SJ" "$@" >/dev/null 2>&1 &
    stopped_pid=$!
    if wait_stopped $stopped_pid; then
        kill -9 $stopped_pid
    else
        fail "samjmp $* never reached its $stage stall point"
    fi
    wait $stopped_pid 2>/dev/null
    stopped_pid=
}

# expect_refusal STAGE_TO_RUN ARGS...: samjmp ARGS fails at once, naming the stage to run.
expect_refusal() {
    local need=$1
    shift
    if timeout 20 "$SJ" "$@" >"$TMP/out" 2>"$TMP/err"; then
        fail "samjmp $* succeeded on a store whose $need was killed"
    elif ! grep -q "run samjmp $need" "$TMP/err"; then
        fail "samjmp $* did not say to run $need: $(cat "$TMP/err")"
    fi
}

f=$TESTDAT/dat/mpileup.1.sam
samtools_answers "$f" || fail "samtools on $f"
for variant in vas mmap; do
    set_opts $variant
    "$SJ" "${opts[@]}" load "$f" st && "$SJ" "${opts[@]}" sort st || fail "setup ($variant)"
    used_sorted=$("$SJ" "${opts[@]}" info st | awk '$1 == "used_bytes" { print $2 }')

    # Sort killed half-way through writing its output: nothing after load counts.
    kill_stage sort "${opts[@]}" sort st
    expect_refusal sort "${opts[@]}" pileup st
    expect_refusal sort "${opts[@]}" index st
    "$SJ" "${opts[@]}" info st | grep -q "^sort	not done" || fail "killed sort shows as done"
    # The lock died with the process: this must not wait (timeout), and must redo the sort
    # in the space the dead one had taken.
    timeout 20 "$SJ" "${opts[@]}" sort st || fail "sort after a killed sort ($variant)"
    used=$("$SJ" "${opts[@]}" info st | awk '$1 == "used_bytes" { print $2 }')
    [ "$used" = "$used_sorted" ] || fail "redone sort uses $used bytes, first one $used_sorted"

    # Index killed in the middle: idxstats refuses, pileup (needs sort only) still works.
    kill_stage index "${opts[@]}" index st
    expect_refusal index "${opts[@]}" idxstats st
    timeout 20 "$SJ" "${opts[@]}" index st || fail "index after a killed index ($variant)"
    check_store "${opts[@]}"

    # Load killed after 100 records: no stage takes the partial records.
    kill_stage load "${opts[@]}" load "$f" st
    expect_refusal load "${opts[@]}" flagstat st
    expect_refusal load "${opts[@]}" sort st
    timeout 20 "$SJ" "${opts[@]}" load "$f" st && "$SJ" "${opts[@]}" sort st &&
        "$SJ" "${opts[@]}" index st || fail "pipeline after a killed load ($variant)"
    check_store "${opts[@]}"
    "$SJ" "${opts[@]}" drop st || fail "drop ($variant)"
done

# Readers share the store, writers have it alone: while a reader holds it (stopped right
# after opening it), another reader runs, but a sort waits (timeout ends it) until the
# reader is killed.
for variant in vas mmap; do
    set_opts $variant
    "$SJ" "${opts[@]}" load "$f" st && "$SJ" "${opts[@]}" sort st &&
        "$SJ" "${opts[@]}" index st || fail "setup for readers ($variant)"
    SAMJMP_STALL=read "$SJ" "${opts[@]}" flagstat st >/dev/null 2>&1 &
    stopped_pid=$!
    wait_stopped $stopped_pid || fail "the first reader never stopped ($variant)"
    timeout 20 "$SJ" "${opts[@]}" flagstat st >"$TMP/got.flagstat" ||
        fail "a second reader did not run beside the first ($variant)"
    expect_same "flagstat beside another reader ($variant)" "$TMP/got.flagstat" "$TMP/want.flagstat"
    timeout 2 "$SJ" "${opts[@]}" sort st >/dev/null 2>&1
    rc=$?
    [ $rc -eq 124 ] || fail "sort did not wait for a reader: exit $rc ($variant)"
    kill -9 $stopped_pid
    wait $stopped_pid 2>/dev/null
    stopped_pid=
    timeout 20 "$SJ" "${opts[@]}" sort st && timeout 20 "$SJ" "${opts[@]}" index st ||
        fail "sort and index after the reader died ($variant)"
    check_store "${opts[@]}"
    "$SJ" "${opts[@]}" drop st || fail "drop ($variant)"
done

# Errors: a missing store, a stage before its input, usage.
"$SJ" flagstat nosuch >/dev/null 2>"$TMP/err" && fail "flagstat of a missing store succeeded"
grep -q "run samjmp load" "$TMP/err" || fail "missing store: $(cat "$TMP/err")"
"$SJ" bogus st >/dev/null 2>&1
[ $? -eq 2 ] || fail "an unknown command did not exit 2"
"$SJ" load /nonexistent.sam st >/dev/null 2>"$TMP/err" && fail "load of a missing file succeeded"
"$SJ" drop st >/dev/null 2>&1

if [ $failures -ne 0 ]; then
    echo "$failures failure(s)" >&2
    exit 1
fi
echo "samjmp matched samtools on $checked file/store pairs; killed stages recovered"
