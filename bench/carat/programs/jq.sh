# jq 1.6 (Debian's, with its security patches): the package's own `make check`, run without
# valgrind, with these tests: tests/jqtest (jq.test, 340 cases), tests/onigtest (the regex
# builtins), tests/shtest (the command line, streaming parser, --seq, modules), and
# tests/utf8test and tests/base64test, which upstream's list has and Debian's patch dropped.
# Left out: tests/mantest (it extracts the manual's examples with rake, a Ruby tool; jq.test
# covers the same builtins) and tests/optionaltest (strptime/mktime cases: two of its three
# fail with this glibc already in base; upstream keeps them apart as optional). Subset, for
# the quick form: shtest's torture loop parses the prefixes 120-151 of
# tests/torture/input0.json (the range upstream uses under valgrind) instead of all 151, 64
# jq runs instead of 302.
#
# Oniguruma: Debian's tarball drops jq's vendored copy (modules/oniguruma is empty) and links
# the system libonig, so by default jq is built against libonig-dev, and only jq's own code
# carries the mode (regex matching runs in Debian's uninstrumented libonig.so). When
# modules/oniguruma holds the libonig source (e.g. the pristine tree of the libonig recipe
# copied there before the build), it is built first, static, with the same $CC $CFLAGS, and
# jq is linked with it, so that the whole program carries the mode.
# needs: autoconf automake libtool libonig-dev
DEB_SOURCE=jq
QUICK=yes

build_program() {
  local onig=()
  if [ -f modules/oniguruma/configure.ac ]; then
    (cd modules/oniguruma &&
      { [ -x configure ] || autoreconf -fi; } &&
      ./configure --disable-shared --prefix="$PWD/../onig-install" \
        CC="$CC" CFLAGS="$CFLAGS" LDFLAGS="$LDFLAGS" &&
      make -j"$JOBS" -C src install)
    onig=(--with-oniguruma="$PWD/modules/onig-install")
  fi
  # The suite's list (see above), and shtest's torture loop over upstream's valgrind range.
  sed -i 's|^TESTS = .*|TESTS = tests/jqtest tests/onigtest tests/shtest tests/utf8test tests/base64test|' \
    Makefile.am
  sed -i 's|^    if \[ -z "\$VALGRIND" \]; then$|    if false; then|' tests/shtest
  grep -q '^    if false; then$' tests/shtest
  # The Debian tarball ships configure.ac only; the parser and lexer are pre-generated.
  [ -x configure ] || autoreconf -fi
  # Static: one program, and one CARAT runtime in it (Debian builds libjq.so).
  ./configure --disable-shared --disable-docs --disable-valgrind "${onig[@]}" \
    CC="$CC" CFLAGS="$CFLAGS" LDFLAGS="$LDFLAGS"
  # The generated sources first: `make jq` alone does not build BUILT_SOURCES.
  make src/version.h src/builtin.inc
  make -j"$JOBS" jq
  # Without libonig-dev, configure quietly builds jq without its regex builtins, and
  # tests/onigtest then fails in every mode: say why here instead.
  if ! ./jq -n '"a" | test("a")' >/dev/null 2>&1; then
    echo "jq was built without oniguruma (is libonig-dev installed?): its regex builtins fail" >&2
    return 1
  fi
  # The workload's input: 60,000 generated records, 13 MB of JSON (about 2 s plain).
  awk -v n=60000 -f - >workload.json <<'EOF'
# Park-Miller generator: exact in awk's doubles, the same in every awk.
function rnd(n) { x = (x * 16807) % 2147483647; return x % n }
BEGIN {
  x = 42
  split("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango", w, " ")
  split("com org net io", tld, " ")
  printf "["
  for (i = 0; i < n; i++) {
    a = w[rnd(20) + 1]; b = w[rnd(20) + 1]
    printf "%s{\"id\":%d,\"name\":\"%s %s\",\"email\":\"%s.%s%s@example.%s\",", (i ? ",\n" : ""), i, a, b, a, b, (rnd(7) ? "" : "_" rnd(100)), tld[rnd(4) + 1]
    printf "\"score\":%d.%02d,\"active\":%s,\"tags\":[", rnd(1000), rnd(100), (rnd(3) ? "true" : "false")
    k = rnd(4) + 1
    for (j = 0; j < k; j++) printf "%s\"%s\"", (j ? "," : ""), w[rnd(8) + 1]
    printf "],\"values\":["
    k = rnd(8) + 2
    for (j = 0; j < k; j++) printf "%s%d", (j ? "," : ""), rnd(10000) - 5000
    printf "],\"address\":{\"street\":\"%d %s street\",\"zip\":\"%05d\"}}", rnd(999) + 1, w[rnd(20) + 1], rnd(100000)
  }
  printf "]\n"
}
EOF
}

run_suite() {
  # tests/setup makes its scratch directory with mktemp -t: keep it in the tree.
  mkdir -p tests-tmp
  TMPDIR="$PWD/tests-tmp" make check NO_VALGRIND=1
}

# A filter over the generated records: regex selection (test, sub: oniguruma), string
# building, grouping, sorting and reductions; the summary it prints is checked.
run_workload() {
  local got
  got=$(./jq -c '
    [ .[]
      | select(.active and (.email | test("^[a-z]+\\.[a-z]+(_[0-9]+)?@example\\.(com|org)$")))
      | { id, name: (.name | ascii_upcase | split(" ") | reverse | join(", ")),
          total: (.values | add), top: (.values | max), tags: (.tags | unique | join(",")),
          zip: (.address.zip | tonumber),
          street: (.address.street | sub("(?<n>[0-9]+) (?<s>[a-z]+)"; "\(.s) \(.n)")) } ]
    | group_by(.tags)
    | map({ tags: .[0].tags, n: length, total: (map(.total) | add), zips: (map(.zip) | add),
            streets: (map(.street | length) | add), first: (sort_by(.total) | .[0].name) })
    | sort_by(-.n, .tags)
    | { groups: length, records: (map(.n) | add), total: (map(.total) | add),
        zips: (map(.zips) | add), streets: (map(.streets) | add), top: .[0:3] }' workload.json)
  echo "$got"
  [ "$got" = "$jq_expected" ]
}
jq_expected='{"groups":162,"records":19940,"total":-66363,"zips":990943824,"streets":320955,"top":[{"tags":"bravo","n":776,"total":-64093,"zips":38637783,"streets":12480,"first":"SIERRA, DELTA"},{"tags":"hotel","n":741,"total":133939,"zips":37997051,"streets":11930,"first":"QUEBEC, ALPHA"},{"tags":"alpha","n":721,"total":233123,"zips":36231367,"streets":11567,"first":"OSCAR, KILO"}]}'
