#!/usr/bin/env bash
# The rpcjmp tool (apps/rpcjmp): a store made, written and read by switching, then served on
# a UNIX socket by `rpcjmp serve` and read and written through it, one connection after
# another (each connection holds the store only while it lasts, so switching reads between
# them do not wait), bad usage refused, and the store deleted. The server is stopped and the
# registry removed however the test ends. Needs EXOMEM_BUILD (set by CTest).
set -u
R=${EXOMEM_BUILD:-build}/apps/rpcjmp/rpcjmp
if [ ! -x "$R" ]; then
    echo "SKIP: no rpcjmp binary at $R" >&2
    exit 77
fi
EXOMEM_ROOT=$(mktemp -d /dev/shm/exomem-rpcjmp-XXXXXX) || exit 1
export EXOMEM_ROOT
SOCK=$EXOMEM_ROOT/serve.sock
server=
cleanup() {
    if [ -n "$server" ]; then
        kill -9 "$server" 2>/dev/null
        wait "$server" 2>/dev/null
    fi
    rm -rf "$EXOMEM_ROOT"
}
trap cleanup EXIT
failures=0
fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}
# same WHAT EXPECTED ACTUAL
same() { [ "$2" = "$3" ] || fail "$1: expected '$2', got '$3'"; }

"$R" create demo 8 0x300000000000 || fail "create"
"$R" create demo 8 0x340000000000 2>/dev/null && fail "a second store of the same name"
"$R" put demo 3 hello || fail "put by switching"
same "get by switching" hello "$("$R" get demo 3)"
same "get 3 bytes" hel "$("$R" get demo 3 3)"
same "first value's length" 65536 "$("$R" get demo 5 | wc -c)"
"$R" get demo 8 2>/dev/null && fail "a key past the store"

"$R" serve demo "$SOCK" 2>"$EXOMEM_ROOT/serve.log" &
server=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
[ -S "$SOCK" ] || fail "the server made no socket"
same "get through the server" hello "$("$R" get demo 3 100 "$SOCK")"
"$R" put demo 4 "via socket" "$SOCK" || fail "put through the server"
same "the server's write, read by switching" "via socket" "$("$R" get demo 4)"
"$R" put demo 4 "by switching" || fail "put by switching while the server runs"
same "a switching write, read through the server" "by switching" \
    "$("$R" get demo 4 100 "$SOCK")"
"$R" get demo 9 8 "$SOCK" 2>/dev/null && fail "the server answered a key past the store"
kill -TERM "$server"
wait "$server" || fail "the server's exit status"
server=
[ -e "$SOCK" ] && fail "the server left its socket"
grep -q "served 4 requests" "$EXOMEM_ROOT/serve.log" || fail "served count: $(cat "$EXOMEM_ROOT/serve.log")"

"$R" frobnicate demo 2>/dev/null; same "usage exit code" 2 "$?"
"$R" delete demo || fail "delete"
"$R" get demo 3 2>/dev/null && fail "get after delete"
same "registry empty" "" "$(ls "$EXOMEM_ROOT/segs" "$EXOMEM_ROOT/vases" 2>/dev/null | grep -v ':$' | grep -v '^$')"
[ "$failures" -eq 0 ] && echo ok
exit $((failures > 0))
