# xz-utils 5.4.1 (Debian 5.4.1-1+deb12u1): `make check`, upstream's whole suite: liblzma's
# unit tests (test_check ... test_vli), test_files.sh (every file of tests/files decoded and
# checked), test_compress_* (generated and prepared inputs through xz at many presets and
# filter chains), test_scripts.sh (xzgrep, xzdiff). About 6 s in base. No process of it lives
# a second, so with EXOMEM_CARAT_MOVES=1 nothing moves; with 100 the mover stops a thread
# about 650 times in the whole suite, with 10,000 about 17,000 (counted with strace).
#
# Built static (--disable-shared): liblzma.a is linked into xz and the test programs, so all
# of them run the instrumented library directly (with libtool's shared build they would run
# through wrapper scripts, with the runtime linked into liblzma.so). --disable-nls: Debian's
# patches change po/pt_BR.po, which with NLS on would need msgfmt to rebuild pt_BR.gmo; the
# other patches touch po4a/ (man page translations, not built here) and C sources only, so
# no autoreconf is needed.
#
# For the ASan peer, two upstream fixes that came after 5.4.1, neither changing what the other
# modes build: crc64_clmul reads the 16-byte-aligned blocks around its buffer (bytes before
# and after it, never across a page), which ASan reports as a global-buffer-overflow in
# test_check; later xz marks the CLMUL CRC code __no_sanitize_address__ ("accessing input
# buffers that aren't aligned to the vector size will inherently trip the address
# sanitizer"), and build_program adds that attribute (a no-op without ASan). test_block_header
# never frees the filter options lzma_block_header_decode allocates (LeakSanitizer: 560
# bytes in 5 allocations; later xz calls lzma_filters_free in the test): run_suite gives
# LeakSanitizer a suppression for that test function alone.
DEB_SOURCE=xz-utils
QUICK=no

build_program() {
  f=src/liblzma/check/crc64_fast.c
  if ! grep -q __no_sanitize_address__ "$f"; then
    n=$(grep -n '^crc64_clmul(const uint8_t \*buf, size_t size, uint64_t crc)$' "$f" | cut -d: -f1)
    sed -i "$((n - 1))i __attribute__((__no_sanitize_address__))" "$f"
  fi
  sed -n '/__no_sanitize_address__/{n;n;p}' "$f" | grep -q '^crc64_clmul('
  ./configure CC="$CC" CFLAGS="$CFLAGS" LDFLAGS="$LDFLAGS" \
    --disable-shared --disable-nls --disable-doc
  make -j"$JOBS"
  # the check programs too, so that the suite times the tests and not their compilation
  make -j"$JOBS" -C tests create_compress_files test_check test_hardware test_stream_flags \
    test_filter_flags test_block_header test_index test_index_hash test_bcj_exact_size \
    test_memlimit test_lzip_decoder test_vli
  # the workload's input (not timed)
  : >workload.in
  while [ "$(stat -c %s workload.in)" -lt 8388608 ]; do
    cat src/liblzma/*/*.c src/liblzma/*/*.h src/xz/*.c >>workload.in
  done
  truncate -s 8388608 workload.in
}

run_suite() {
  echo 'leak:test_lzma_block_header_decode' >lsan.supp
  # xzdiff falls back to a mktemp directory on shells without /dev/fd: keep it in the tree
  mkdir -p tmp
  TMPDIR=$PWD/tmp LSAN_OPTIONS="suppressions=$PWD/lsan.supp:print_suppressions=0" make check
}

# 8 MiB of the package's own sources, compressed by xz -6 (one thread) and back, checked.
run_workload() {
  src/xz/xz -6 -T1 -c workload.in >workload.xz
  src/xz/xz -d -c workload.xz | cmp - workload.in
}
