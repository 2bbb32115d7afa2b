#!/usr/bin/env bash
# libexomem.a must not clash with an application's own names: every global symbol it
# defines starts with one of the library's prefixes (docs/hacking.md): seg_ and vas_
# (SpaceJMP's calls), exo_ (other capabilities and internals), exomem_ (library-wide).
# And libexomem.so exports only the public API (internals are hidden).
set -u
build=${EXOMEM_BUILD:?EXOMEM_BUILD is not set}
command -v nm >/dev/null || { echo "no nm: skipped"; exit 77; }
lib=$build/src/libexomem.a
# Symbols the sanitizers and the fuzzer's coverage add for the library's own globals.
sanitizer_made='^(__odr_asan|__asan_|__ubsan_|__sancov_|__start___sancov|__stop___sancov)' 
[ -f "$lib" ] || { echo "no $lib"; exit 1; }
bad=$(nm -g --defined-only "$lib" | awk 'NF==3 {print $3}' | sort -u |
      grep -vE '^(seg_|vas_|exo_|exomem_)' | grep -vE "$sanitizer_made")
if [ -n "$bad" ]; then
    echo "global symbols of libexomem.a without a library prefix:"
    echo "$bad"
    exit 1
fi
so=$(ls "$build"/src/libexomem.so.* 2>/dev/null | head -1)
if [ -n "$so" ]; then
    # Exported: declared in include/exomem/*.h. Anything else exported is an internal leak.
    src=${EXOMEM_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
    leaked=$(nm -D --defined-only "$so" | awk 'NF==3 && $2 ~ /[TDBR]/ {print $3}' | sort -u |
             grep -vE "$sanitizer_made" |
             while read -r sym; do
                 grep -qw "$sym" "$src"/include/exomem/*.h || echo "$sym"
             done)
    if [ -n "$leaked" ]; then
        echo "libexomem.so exports names that no public header declares:"
        echo "$leaked"
        exit 1
    fi
fi
echo "every global symbol of libexomem.a has a library prefix; libexomem.so exports only the API"
