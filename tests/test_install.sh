#!/usr/bin/env bash
# Install exomem into a temporary prefix and build examples/spacejmp_list.c against the
# installed copy the way a user would, with pkg-config: once against the shared library
# (run with LD_LIBRARY_PATH), once statically (pkg-config --static). Each program is run
# with a temporary registry. Reuses $EXOMEM_BUILD when set (CTest sets it), else configures
# and builds $EXOMEM_SRC (default: this checkout) in a temporary directory.
# Exit 77 (skipped) without pkg-config.
set -euo pipefail

command -v pkg-config >/dev/null || { echo "SKIP: pkg-config is not installed"; exit 77; }
cc=${CC:-cc}
src=${EXOMEM_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
tmp=$(mktemp -d)
root=$(mktemp -d /dev/shm/exomem-test-XXXXXX)
trap 'rm -rf "$tmp" "$root"' EXIT
prefix=$tmp/prefix

fail() { echo "test_install: $*" >&2; exit 1; }

if [ -n "${EXOMEM_BUILD:-}" ] && [ -f "$EXOMEM_BUILD/CMakeCache.txt" ]; then
  build=$EXOMEM_BUILD
else
  build=$tmp/build
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" -j2 >/dev/null
fi
cmake --install "$build" --prefix "$prefix" >/dev/null

# The library directory is lib, or lib/<multiarch> when the configured prefix was /usr.
pc=$(find "$prefix" -name exomem.pc -path '*/pkgconfig/*' | head -n1)
[ -n "$pc" ] || fail "no exomem.pc installed under $prefix"
libdir=$(dirname "$(dirname "$pc")")
[ -f "$libdir/libexomem.a" ] || fail "no libexomem.a in $libdir"
ls "$libdir"/libexomem.so* >/dev/null 2>&1 || fail "no libexomem.so in $libdir"
[ -f "$prefix/include/exomem/exomem.h" ] || fail "headers not installed in $prefix/include"

# exomem.pc is relocatable: it finds the prefix from its own directory, so the tree this
# test installed (under a prefix other than the configured one) needs no --define-variable.
pkgconf() {
  PKG_CONFIG_PATH=$(dirname "$pc") pkg-config "$@" exomem
}
pkgconf --exists || fail "pkg-config cannot read $pc"
incdir=$(cd "$prefix/include" && pwd -P)
case "$(pkgconf --cflags)" in
  *"-I$prefix/include"*|*"-I$incdir"*) ;;
  *) # One of the -I flags (the others come from Requires.private, e.g. hiredis's).
     named=""
     for flag in $(pkgconf --cflags); do
       case "$flag" in
         -I*) [ "$(cd "${flag#-I}" 2>/dev/null && pwd -P)" = "$incdir" ] && named=1;;
       esac
     done
     [ -n "$named" ] || fail "cflags '$(pkgconf --cflags)' do not name $prefix/include";;
esac

# A library built with the sanitizers needs them in the program too, and cannot be linked
# into a fully static program; it is then linked statically with the C library shared.
san=""
grep -q '^EXOMEM_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" && san="-fsanitize=address,undefined"

example=$src/examples/spacejmp_list.c
# shellcheck disable=SC2046  # pkg-config's output is meant to split into words
$cc -std=c11 -Wall -Wextra -Werror $san -o "$tmp/list_shared" "$example" \
  $(pkgconf --cflags --libs)
needs() { readelf -d "$1" 2>/dev/null | grep 'NEEDED' || true; }
case "$(needs "$tmp/list_shared")" in *libexomem.so*) ;; *) fail "shared build does not use libexomem.so";; esac
if [ -z "$san" ]; then
  # shellcheck disable=SC2046
  $cc -std=c11 -Wall -Wextra -Werror -static -o "$tmp/list_static" "$example" \
    $(pkgconf --static --cflags --libs)
else
  # shellcheck disable=SC2046
  $cc -std=c11 -Wall -Wextra -Werror $san -o "$tmp/list_static" "$example" \
    $(pkgconf --static --cflags) -Wl,-Bstatic $(pkgconf --static --libs) -Wl,-Bdynamic
fi
case "$(needs "$tmp/list_static")" in *libexomem*) fail "static build still needs libexomem.so";; esac

chmod 1777 "$root"
echo "== shared"
EXOMEM_ROOT=$root LD_LIBRARY_PATH=$libdir "$tmp/list_shared" || fail "the shared build failed"
echo "== static"
EXOMEM_ROOT=$root "$tmp/list_static" || fail "the static build failed"
# Each run deletes what it made: the registry must hold no segment or VAS name now.
if [ -d "$root/names" ] && [ -n "$(ls -A "$root/names")" ]; then
  fail "objects left in the registry: $(ls "$root/names")"
fi
echo "test_install: OK"
