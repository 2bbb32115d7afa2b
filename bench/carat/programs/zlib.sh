# zlib 1.2.13 (Debian 1:1.2.13.dfsg-1): the Makefile's own `make test`: example and minigzip
# (a hello-world round trip, then example's deflate/inflate/gz* checks) against the static
# library (teststatic), the shared one (testshared: libz.so from the tree; built with exomem-cc
# it carries the CARAT runtime itself, and examplesh/minigzipsh take the hooks from it) and
# the 64-bit-offset build (test64).
# Each test process lives a few milliseconds and the mover's first tick comes 1/rate seconds
# after start: with EXOMEM_CARAT_MOVES=1 nothing moves, with 100 at most a move or two in the
# whole suite, with 10,000 a few dozen (counted with strace, as the stop signals sent).
DEB_SOURCE=zlib
QUICK=no

build_program() {
  # zlib's configure takes CC, CFLAGS and LDFLAGS from the environment and writes them into
  # the Makefile (it adds -D_LARGEFILE64_SOURCE=1 -DHAVE_HIDDEN, and -fPIC for libz.so).
  CC="$CC" CFLAGS="$CFLAGS" LDFLAGS="$LDFLAGS" ./configure
  make -j"$JOBS"
  # the workload's input (not timed)
  : >workload.in
  while [ "$(stat -c %s workload.in)" -lt 29360128 ]; do cat ./*.c ./*.h >>workload.in; done
  truncate -s 29360128 workload.in
}

run_suite() {
  make test
}

# 28 MiB of the package's own sources, compressed by minigzip (static build, level 6) and
# back, checked.
run_workload() {
  ./minigzip -c workload.in >workload.gz
  ./minigzip -d -c workload.gz | cmp - workload.in
}
