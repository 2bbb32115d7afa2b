# Lua 5.4.4 (Debian's lua5.4): the interpreter and luac, built statically with the plain
# upstream src/Makefile. Debian's tarball ships no tests (upstream's lua-5.4.4-tests is a
# separate download, and not Debian's), so the suite is ours: the Lua scripts in
# bench/carat/programs/lua/, written for this evaluation, each asserting computed results
# against known answers (checksums computed independently, closed forms, properties) for
# what the interpreter does with memory: tables growing and shrinking, strings (interning,
# concatenation, format, patterns), closures and upvalues, coroutines, metatables, the
# garbage collector (modes, weak tables, finalizers), errors and stack overflow,
# string.pack/unpack, io buffers. A script prints nothing and exits non-zero on a wrong
# result. The suite takes about 4 s in base, 30-80 s with tracking (every TValue copy
# into the Lua stack or a table is an escape hook). Under moves (carat build) coroutines
# fails at every rate: closing an upvalue writes its type tag over the low byte of its old
# back pointer into the global state, and the move patches that word (fixed by giving the
# runtime each escape's exact value); strings failed at 100 and 10,000 moves a second: the
# runtime took words that only looked like pointers for escapes when Lua's arrays were
# realloc'd or copied (a TValue's tag over stale pointer bytes in its padding, glibc's
# free-list links in a fresh block), and moves rewrote them (fixed by carrying over only
# the pointers the runtime was told of).
DEB_SOURCE=lua5.4
QUICK=no

LUA_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")/lua" && pwd)
LUA_TESTS="tables strings closures coroutines metatables gc pack errors structures io"

build_program() {
  # Debian's patch 0001 turns src/Makefile into a libtool build of shared libraries (and a
  # dpkg-buildflags call); take that hunk back out to get upstream's static build. Its other
  # patches (module paths, extern "C", two CVE fixes) stay; the module-path one needs the
  # header debian/rules generates.
  if grep -q LIBTOOL src/Makefile; then
    awk '/^--- a\/src\/Makefile/{p=1} p' debian/patches/0001-build-system.patch | patch -R -p1
  fi
  printf '#ifndef _LUA_DEB_MULTIARCH_\n#define _LUA_DEB_MULTIARCH_\n#define DEB_HOST_MULTIARCH "%s"\n#endif\n' \
    "$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)" \
    >src/lua5.4-deb-multiarch.h
  # upstream's CFLAGS (-O2 -Wall -Wextra -DLUA_COMPAT_5_3 -DLUA_USE_LINUX) then the mode's
  make -C src -j"$JOBS" linux-noreadline CC="$CC" MYCFLAGS="-std=gnu99 $CFLAGS" \
    MYLDFLAGS="$LDFLAGS"
}

run_suite() {
  local t failed=0
  for t in $LUA_TESTS; do
    if TZ=UTC ./src/lua "$LUA_SCRIPTS/$t.lua"; then
      echo "PASS: $t"
    else
      echo "FAIL: $t (exit $?)"
      failed=$((failed + 1))
    fi
  done
  # luac: every script compiles (one file per run: luac 5.4.4 frees twice when it combines
  # several files into one chunk, in every build), and one runs from its binary chunk.
  local ok=true
  for t in "$LUA_SCRIPTS"/*.lua; do ./src/luac -p "$t" || ok=false; done
  if $ok && ./src/luac -s -o carat-luac.out "$LUA_SCRIPTS/closures.lua" &&
     ./src/lua carat-luac.out; then
    echo "PASS: luac"
  else
    echo "FAIL: luac"
    failed=$((failed + 1))
  fi
  rm -f carat-luac.out
  echo "$failed failed"
  [ "$failed" -eq 0 ]
}

# Binary trees of depth 15 (and a stretch tree of 16), a word count over 15,000 generated
# lines, a coroutine pipeline: about 1.5 s; the script checks its results.
run_workload() {
  ./src/lua "$LUA_SCRIPTS/workload.lua" 15 >/dev/null
}
