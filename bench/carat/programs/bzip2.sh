# bzip2 1.0.8: the Makefile's own test (three sample files compressed and decompressed at
# block sizes 1 and 3, compared with the shipped results).
DEB_SOURCE=bzip2
QUICK=yes

# The workload's input, 12 MiB of the package's own sources, is made here, not timed.
build_program() {
  make -j"$JOBS" CC="$CC" CFLAGS="$CFLAGS -D_FILE_OFFSET_BITS=64" LDFLAGS="$LDFLAGS" \
    bzip2 bzip2recover
  : >workload.in
  while [ "$(stat -c %s workload.in)" -lt 12582912 ]; do cat ./*.c ./*.h >>workload.in; done
  truncate -s 12582912 workload.in
}

run_suite() {
  make CC="$CC" CFLAGS="$CFLAGS -D_FILE_OFFSET_BITS=64" LDFLAGS="$LDFLAGS" test
}

# The input compressed at -9 and back, checked. Debian's Makefile links bzip2 with the
# tree's libbz2.so: LD_LIBRARY_PATH makes it run that one (the mode's) and not the system's.
run_workload() {
  LD_LIBRARY_PATH=. ./bzip2 -9 -c workload.in >workload.bz2
  LD_LIBRARY_PATH=. ./bzip2 -d -c workload.bz2 | cmp - workload.in
}
