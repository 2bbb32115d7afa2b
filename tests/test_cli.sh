#!/usr/bin/env bash
# The exomem command-line tool: every command, its output, its exit codes (0 ok, 1 failed,
# 2 usage, 3 not found, 4 denied, 5 exists, 6 busy), and that no failing command changes the
# registry (`ls --json` is compared before and after each one).
# Needs EXOMEM_BIN (set by CTest); uses its own registry under /dev/shm, removed at the end.
set -u

if [ -z "${EXOMEM_BIN:-}" ] || [ ! -x "$EXOMEM_BIN" ]; then
    echo "SKIP: EXOMEM_BIN is not an executable exomem binary" >&2
    exit 77
fi
X=$EXOMEM_BIN
EXOMEM_ROOT=$(mktemp -d /dev/shm/exomem-cli-XXXXXX) || exit 1
chmod 1777 "$EXOMEM_ROOT"
export EXOMEM_ROOT
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$EXOMEM_ROOT" "$TMP"' EXIT

HAVE_PY=0
command -v python3 >/dev/null 2>&1 && HAVE_PY=1

B0=0x300000000000   # 1 GiB-aligned test bases, as tests/harness.c test_base(i)
B1=0x340000000000
B2=0x380000000000
failures=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# run ARGS...: run exomem; output in $TMP/out and $TMP/err, exit code in $rc.
run() {
    "$X" "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
}

# expect RC ARGS...: exomem ARGS must exit RC; failures must explain themselves on stderr
# as "exomem: ..." and successes must be quiet there.
expect() {
    local want=$1
    shift
    run "$@"
    if [ "$rc" -ne "$want" ]; then
        fail "exomem $* exited $rc, expected $want; stderr: $(cat "$TMP/err")"
    elif [ "$want" -ne 0 ] && ! grep -q '^exomem: ' "$TMP/err"; then
        fail "exomem $* exited $rc without an 'exomem: ' message on stderr"
    elif [ "$want" -eq 0 ] && [ -s "$TMP/err" ]; then
        fail "exomem $* succeeded but wrote to stderr: $(cat "$TMP/err")"
    fi
}

snapshot() {
    "$X" ls --json >"$1" 2>/dev/null || fail "ls --json failed while taking a snapshot"
}

# expect_unchanged RC ARGS...: as expect, and the registry must be the same afterwards.
expect_unchanged() {
    snapshot "$TMP/before"
    expect "$@"
    snapshot "$TMP/after"
    cmp -s "$TMP/before" "$TMP/after" || fail "exomem ${*:2} (exit $rc) changed the registry"
}

# out_has TEXT / err_has TEXT: the last command's stdout / stderr contains TEXT.
out_has() { grep -qF -- "$1" "$TMP/out" || fail "stdout lacks '$1': $(cat "$TMP/out")"; }
err_has() { grep -qF -- "$1" "$TMP/err" || fail "stderr lacks '$1': $(cat "$TMP/err")"; }

# json_check PYTHON_EXPR: `ls --json` parses and the expression (over `d`) is true.
json_check() {
    [ "$HAVE_PY" = 1 ] || return 0
    "$X" ls --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
segs = {s["name"]: s for s in d["segments"]}
vases = {v["name"]: v for v in d["vases"]}
sys.exit(0 if eval(sys.argv[1]) else 1)' "$1" || fail "ls --json: not true: $1"
}

# --- global options, help of every command ---
expect 0 --version
grep -Eq '^exomem [0-9]+\.[0-9]+\.[0-9]+$' "$TMP/out" || fail "--version printed: $(cat "$TMP/out")"
expect 0 --help
out_has "usage: exomem"
out_has "Exit status"
for code in 0 1 2 3 4 5 6; do
    grep -Eq "^  $code  " "$TMP/out" || fail "--help does not document exit code $code"
done
expect 0 -h
expect 2
expect 2 bogus
expect 2 --bogus
for cmd in "ls" "show" "seg create" "seg rm" "vas create" "vas add-seg" "vas rm-seg" "vas rm"; do
    # shellcheck disable=SC2086 # split the command words on purpose
    expect 0 $cmd --help
    out_has "usage: exomem $cmd "
done
for group in seg vas; do
    expect 0 $group --help
    out_has "Subcommands:"
    expect 2 $group
    expect 2 $group bogus
    expect 2 $group --bogus
done
expect 0 seg create --bogus --help   # --help wins over other problems
out_has "usage: exomem seg create"

# --- an empty registry ---
expect 0 ls
out_has "segments: 0"
out_has "vases: 0"
json_check 'd["segments"] == [] and d["vases"] == [] and d["root"] == "'"$EXOMEM_ROOT"'"'

# --- create, show, ls ---
expect 0 seg create s0 --base $B0 --size 2M
expect 0 seg create s1 --base=$B1 --size=4M --page 4k --mode 0600
expect 0 seg create s2 --base 58274116272128 --size 1m --page 4096 --mode 640 --noreserve
expect 0 vas create v0
expect 0 vas create v1 --mode 0600
expect 0 vas add-seg v0 s0
expect 0 vas add-seg v0 s1 --ro
expect 0 vas add-seg v1 s0 --ro

expect 0 show s0
out_has "segment s0"
out_has "0x300000000000"
out_has "2M (2097152 bytes)"
out_has "0660"
out_has "v0:rw,v1:ro"
grep -q '^vas ' "$TMP/out" && fail "show s0 printed a VAS though none is called s0"
grep -Eq '^  resident +2M$' "$TMP/out" || fail "show s0 lacks its resident size: $(cat "$TMP/out")"
expect 0 show v0
out_has "vas v0"
grep -Eq '^    s0 +rw +0x300000000000-0x300000200000' "$TMP/out" || fail "show v0: $(cat "$TMP/out")"
grep -Eq '^    s1 +ro ' "$TMP/out" || fail "show v0 does not list s1 read-only"
expect 0 ls
grep -Eq '^[0-9]+ +s1 +0x340000000000 +4M +4K +0600 ' "$TMP/out" || fail "ls: $(cat "$TMP/out")"
grep -Eq '^[0-9]+ +v0 +0660 .* s0:rw,s1:ro$' "$TMP/out" || fail "ls: no v0 row"
# Page size and backing: s0 is reserved (all of it resident), s2 is sparse (nothing).
out_has "RESIDENT"
grep -Eq '^[0-9]+ +s0 +0x300000000000 +2M +4K +0660 +[^ ]+ +2M +[0-9KMG]+ +v0:rw,v1:ro$' \
    "$TMP/out" || fail "ls: s0 row lacks its backing: $(cat "$TMP/out")"
grep -Eq '^[0-9]+ +s2 +0x350000000000 +1M +4K +0640 +[^ ]+ +0 +0 +-$' "$TMP/out" ||
    fail "ls: sparse s2 is not shown as unbacked: $(cat "$TMP/out")"
expect 0 ls --json
if [ "$HAVE_PY" = 1 ]; then
    python3 -c 'import json,sys; json.load(sys.stdin)' <"$TMP/out" || fail "ls --json is not JSON"
fi
json_check 'sorted(segs) == ["s0", "s1", "s2"] and sorted(vases) == ["v0", "v1"]'
json_check 'segs["s0"]["base"] == 0x300000000000 and segs["s0"]["size"] == 2 << 20'
json_check 'segs["s0"]["page_size"] == 4096 and segs["s0"]["mode"] == "0660"'
json_check 'segs["s1"]["mode"] == "0600" and segs["s1"]["base_hex"] == "0x340000000000"'
json_check 'segs["s2"]["base"] == 0x350000000000 and segs["s2"]["size"] == 1 << 20'
json_check 'segs["s2"]["mode"] == "0640" and segs["s2"]["noreserve"] is True'
json_check 'segs["s0"]["resident"] == 2 << 20 and segs["s0"]["huge"] <= segs["s0"]["resident"]'
json_check 'segs["s0"]["page"] == "4K" and segs["s0"]["thp"] is False and segs["s2"]["resident"] == 0'
json_check 'segs["s0"]["uid"] == '"$(id -u)"' and vases["v1"]["mode"] == "0600"'
json_check '[(s["name"], s["access"]) for s in vases["v0"]["segments"]] == [("s0", "rw"), ("s1", "ro")]'
json_check '[(v["name"], v["access"]) for v in segs["s0"]["vases"]] == [("v0", "rw"), ("v1", "ro")]'
json_check 'vases["v0"]["segments"][0]["id"] == segs["s0"]["id"] and d["corrupt_vases"] == 0'
expect 0 show --json v0
if [ "$HAVE_PY" = 1 ]; then
    python3 -c 'import json,sys; d = json.load(sys.stdin); sys.exit(not (d["segment"] is None and d["vas"]["name"] == "v0"))' \
        <"$TMP/out" || fail "show --json v0: $(cat "$TMP/out")"
fi

# A segment and a VAS of the same name: show prints both, seg/vas pick one.
expect 0 vas create s2
expect 0 show s2
out_has "segment s2"
out_has "vas s2"
expect 0 show seg s2
grep -q '^vas ' "$TMP/out" && fail "show seg s2 printed the VAS too"
expect 0 show vas s2
grep -q '^segment ' "$TMP/out" && fail "show vas s2 printed the segment too"
expect 0 vas rm s2

# --- transparent huge pages: a tmpfs that allows them (root gets a private mount) ---
run seg create t0 --base $B2 --size 4M --page thp
if [ "$rc" -eq 0 ]; then
    json_check 'segs["t0"]["page"] == "THP" and segs["t0"]["thp"] is True and segs["t0"]["page_size"] == 4096'
    json_check 'segs["t0"]["resident"] == 4 << 20 and segs["t0"]["flags"] == 2'
    expect 0 show t0
    out_has "page size  THP"
    expect 0 seg rm t0
elif [ "$rc" -ne 1 ] || ! grep -q 'huge=' "$TMP/err"; then
    fail "seg create --page thp exited $rc without saying what to mount: $(cat "$TMP/err")"
fi

# --- usage errors: exit 2, registry unchanged ---
C=(seg create n --base $B2)
expect_unchanged 2 seg create
expect_unchanged 2 seg create n
expect_unchanged 2 seg create n --size 2M
expect_unchanged 2 "${C[@]}"
expect_unchanged 2 "${C[@]}" --size
expect_unchanged 2 seg create n --base --size 2M
for bad in "" 12X -1 0x 0xZZ 0x30000000000g " 123" "1 " 99999999999999999999999 1G 0x1p3; do
    expect_unchanged 2 seg create n --base "$bad" --size 2M
done
for bad in "" 12X -1 -2M 2MX 2M2 M 0x 99999999999999999999999 99999999999G 20000000000G \
            0 010 " 2M" 2.5M; do
    expect_unchanged 2 "${C[@]}" --size "$bad"
done
for bad in "" 3m 4m 2k 1t 4096k 0 x -4k 4k4 thpx th; do
    expect_unchanged 2 "${C[@]}" --size 2M --page "$bad"
done
for bad in "" 8 0999 -1 0x1a4 17777 010000 rw 6a; do
    expect_unchanged 2 "${C[@]}" --size 2M --mode "$bad"
    expect_unchanged 2 vas create n --mode "$bad"
done
expect_unchanged 2 "${C[@]}" --size 2M --bogus
expect_unchanged 2 "${C[@]}" --size 2M -x
expect_unchanged 2 "${C[@]}" --size 2M --size 4M
expect_unchanged 2 "${C[@]}" --size 2M extra
expect_unchanged 2 "${C[@]}" --size 2M --noreserve=1
expect_unchanged 2 "${C[@]}" --size 2M --mode
expect_unchanged 2 seg rm
expect_unchanged 2 seg rm s0 s1
expect_unchanged 2 vas create
expect_unchanged 2 vas create a b
expect_unchanged 2 vas add-seg v0
expect_unchanged 2 vas add-seg v0 s2 extra
expect_unchanged 2 vas add-seg v0 s2 --ro=yes
expect_unchanged 2 vas rm-seg v0
expect_unchanged 2 vas rm
expect_unchanged 2 ls extra
expect_unchanged 2 ls --bogus
expect_unchanged 2 show
expect_unchanged 2 show s0 v0
expect_unchanged 2 show seg s0 v0

# Names the library refuses (EXO_EBADNAME, EXO_ENAMETOOLONG) are usage errors too.
long64=$(printf 'n%.0s' $(seq 64))
long63=${long64:1}
for bad in a/b .hidden "" "sp ace" "$long64"; do
    expect_unchanged 2 seg create "$bad" --base $B2 --size 2M
    expect_unchanged 2 vas create "$bad"
    expect_unchanged 2 seg rm "$bad"
    expect_unchanged 2 show "$bad"
done
expect_unchanged 2 seg create n --base 0x300000000001 --size 2M            # EXO_EALIGN
expect_unchanged 2 seg create n --base $B2 --size 4097                      # EXO_EALIGN
expect_unchanged 2 seg create n --base 0x7ffffffff000 --size 8K             # EXO_ESIZE
expect 0 seg create "$long63" --base $B2 --size 4K
expect 0 seg rm "$long63"

# --- exists already (5), not found (3), busy (6), failed (1) ---
expect_unchanged 5 seg create s0 --base $B2 --size 2M
err_has "exists already"
expect_unchanged 5 vas create v0
expect_unchanged 5 vas add-seg v0 s0
for args in "seg rm nope" "vas rm nope" "show nope" "show seg v0" "show vas s0" \
            "vas add-seg nope s0" "vas add-seg v0 nope" "vas rm-seg v0 s2" "vas rm-seg nope s0"; do
    # shellcheck disable=SC2086
    expect_unchanged 3 $args
done
expect_unchanged 6 seg rm s0
err_has "in use"
expect 0 seg create s3 --base $B0 --size 2M   # same base as s0: fine until both in one VAS
expect_unchanged 1 vas add-seg v0 s3          # EXO_EOVERLAP
err_has "overlaps"

# --- permission denied (4): another user may not delete or change root's objects ---
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
    as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$X" "$@"; }
    for args in "seg rm s3" "vas rm v1" "vas add-seg v1 s3"; do
        snapshot "$TMP/before"
        # shellcheck disable=SC2086
        as_nobody $args >/dev/null 2>"$TMP/err"
        rc=$?
        [ "$rc" -eq 4 ] || fail "as nobody, exomem $args exited $rc, expected 4: $(cat "$TMP/err")"
        snapshot "$TMP/after"
        cmp -s "$TMP/before" "$TMP/after" || fail "as nobody, exomem $args changed the registry"
    done
fi

# --- removal ---
expect 0 vas rm-seg v0 s0
json_check '[s["name"] for s in vases["v0"]["segments"]] == ["s1"]'
expect 6 seg rm s0          # still in v1
expect 0 vas rm v1
expect 0 seg rm s0
expect 0 vas rm v0          # its segments remain
json_check 'sorted(segs) == ["s1", "s2", "s3"] and vases == {} and segs["s1"]["vases"] == []'
for s in s1 s2 s3; do
    expect 0 seg rm $s
done
expect 0 ls
out_has "segments: 0"
out_has "vases: 0"
json_check 'd["segments"] == [] and d["vases"] == []'
[ -z "$(ls -A "$EXOMEM_ROOT/names" 2>/dev/null)" ] || fail "names left in the registry"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
fi
echo "test_cli: all checks passed"
