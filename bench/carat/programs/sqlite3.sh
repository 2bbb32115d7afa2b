# needs: tcl8.6-dev
# SQLite 3.40.1 (Debian's sqlite3): upstream's own test programs, built from the tree.
#
# Build. configure, then `make sqlite3.c` (the amalgamation; its generators lemon and
# mkkeywordhash are built with the same $CC), then two compilations of sqlite3.c, the least
# the test programs allow, run side by side under make -j"$JOBS":
#   sqlite3-lib.o  the amalgamation with fuzzcheck's feature set (FTS3/4/5, R-tree, Geopoly,
#                  dbstat, bytecode vtab, memsys5; FUZZCHECK_OPT of Makefile.in without
#                  SQLITE_MAX_MEMORY, which would cap speedtest1's heap at 50 MB: fuzzcheck sets
#                  its own 100 MB hard heap limit for every case) plus speedtest1's ST_OPT.
#                  Both speedtest1 and fuzzcheck link it, instead of each compiling its own
#                  sqlite3.c as Makefile.in does.
#   testfixture    Makefile.in's own target: the Tcl test harness needs sqlite3.c compiled
#                  with SQLITE_TEST and SQLITE_PRIVATE="" (test hooks, internals exported), so
#                  it cannot share the object above.
#
# Suite (about 20 s with the plain build, 70 s with tracking), three parts, each must pass:
#   1. speedtest1 --verify at --size 20 on an in-memory database, on a file with the rollback
#      journal and on a file in WAL mode: each must print the verification hash of all query
#      results that the plain build prints (fixed below).
#   2. fuzzcheck (Makefile.in's `fuzztest`) over four of its eight test/fuzzdata*.db, one of
#      each kind: 3 (corrupt database files), 4 (JSON), 5 (OSS-Fuzz's SQL cases) and
#      6 (UPSERT), about 24,000 cases. All eight take 20 s with the plain build but 75 s
#      with tracking alone, the most of this suite; 1, 2 and 8 are more SQL fuzz of the kind
#      of 5, 7 more database fuzz. sessionfuzz is left out: it #includes its own sqlite3.c,
#      a third compilation for one small check.
#   3. A subset of the Tcl tests: the whole `veryquick` set (about 1,000 files) takes far too
#      long for this evaluation. The 40 files below take about 12 s of CPU with the plain build and
#      cover the B-tree and record format, the pager and rollback journal, WAL, expressions
#      and functions, joins, WHERE planning, compound selects, CTEs and window functions,
#      and writes with triggers. Left out on purpose: pager1, wal2 and delete fail when run
#      as root (they expect a read-only file to be unwritable), and the files that spend
#      their time sleeping or on huge data (wal3, trans2, bigsort, sort2).
#      Each file runs in its own testfixture process in carat-tcl/; it passes when the
#      process exits 0 and reports "0 errors out of N tests".
# Everything, the temporary files SQLite makes too (SQLITE_TMPDIR), stays in the tree.
DEB_SOURCE=sqlite3
QUICK=no

SQLITE_TCL_TESTS="
  btree01 btreefault bigrow rowid index autovacuum incrvacuum vacuum corrupt
  pager2 journal2 savepoint savepoint2 trans
  wal wal4 wal5 wal9 walcksum walmode
  expr func printf e_expr
  join join5 join7 join8 joinB joinD where where7 where8 select1 select9 with1 window1 sort
  update trigger1
"
# speedtest1 --verify --size 20: the hash of every result, from the plain -O2 build.
SQLITE_SPEEDTEST_HASH="3807866 2738af78e6eaae28c03f3766bc00b9defffe6fac85355c4d"

build_program() {
  ./configure --disable-shared --disable-readline CC="$CC" CFLAGS="$CFLAGS" LDFLAGS="$LDFLAGS" >configure.out
  cat >carat.mk <<'EOF'
include Makefile
CARAT_LIB_OPT = $(filter-out -DSQLITE_OSS_FUZZ -DSQLITE_MAX_MEMORY=%,$(FUZZCHECK_OPT)) $(ST_OPT)
sqlite3-lib.o: sqlite3.c sqlite3.h
	$(TCC) $(CARAT_LIB_OPT) -c sqlite3.c -o $@
speedtest1-lib: $(TOP)/test/speedtest1.c sqlite3-lib.o
	$(TCC) $(ST_OPT) $(LDFLAGS) -o $@ $(TOP)/test/speedtest1.c sqlite3-lib.o $(TLIBS)
fuzzcheck-lib: $(FUZZCHECK_SRC) sqlite3-lib.o
	$(TCC) $(FUZZCHECK_OPT) $(LDFLAGS) -o $@ $(FUZZCHECK_SRC) sqlite3-lib.o $(TLIBS)
EOF
  # The generators (lemon, mkkeywordhash) are built with $CC $CFLAGS too; under ASan they
  # exit with LeakSanitizer's report of the memory they never free, which is no fault.
  ASAN_OPTIONS=detect_leaks=0 make sqlite3.c
  make -j"$JOBS" -f carat.mk testfixture speedtest1-lib fuzzcheck-lib
  mv speedtest1-lib speedtest1
  mv fuzzcheck-lib fuzzcheck
}

run_suite() {
  local top=$PWD fail=0 t out
  rm -rf carat-tmp carat-tcl && mkdir carat-tmp carat-tcl
  export SQLITE_TMPDIR=$top/carat-tmp TMPDIR=$top/carat-tmp

  echo "== speedtest1 --verify"
  for cfg in "--memdb" "--journal delete" "--journal wal"; do
    rm -f carat-tmp/st.db*
    # shellcheck disable=SC2086
    out=$(./speedtest1 --verify --size 20 $cfg carat-tmp/st.db | tail -n 1) || out="exit $?"
    if [ "$out" = "Verification Hash: $SQLITE_SPEEDTEST_HASH" ]; then
      echo "speedtest1 $cfg: ok"
    else
      echo "speedtest1 $cfg: FAILED ($out)"; fail=1
    fi
  done

  echo "== fuzzcheck"
  ./fuzzcheck test/fuzzdata3.db test/fuzzdata4.db test/fuzzdata5.db test/fuzzdata6.db || { echo "fuzzcheck: FAILED"; fail=1; }

  echo "== tcl tests"
  cd carat-tcl
  for t in $SQLITE_TCL_TESTS; do
    if ../testfixture "../test/$t.test" >"$t.log" 2>&1 \
       && grep -aq '^0 errors out of' "$t.log"; then
      echo "$t: $(grep -a '^0 errors out of' "$t.log" | cut -d' ' -f1-6)"
    else
      echo "$t: FAILED"; grep -a '^!\|errors out of' "$t.log" | head -n 20 || tail -n 20 "$t.log"
      fail=1
    fi
  done
  cd "$top"
  return $fail
}

# speedtest1's standard test set at --size 80 on an in-memory database (about 2 s with the
# plain build).
run_workload() {
  mkdir -p carat-tmp
  SQLITE_TMPDIR=$PWD/carat-tmp TMPDIR=$PWD/carat-tmp ./speedtest1 --memdb --size 80 >/dev/null
}
