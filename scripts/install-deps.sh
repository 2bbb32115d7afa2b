#!/usr/bin/env bash
# Install what building, testing and the report need, from Debian's packages, only where
# missing. Usage: scripts/install-deps.sh [test|report]
set -eu
want=(cmake make gcc pkg-config xz-utils)  # xz: test_launcher runs it under the launcher
# The pager's compressed memory store.
want+=(liblz4-dev libzstd-dev)
# The pager's Redis stores (hiredis), and the servers test_pager_redis starts (redis-server
# brings redis-cli, which makes the test's cluster).
want+=(libhiredis-dev redis-server)
# The pager's io_uring file store.
want+=(liburing-dev)
# test_report runs the report driver's own check (bench/run.py --selftest), which plots.
want+=(python3 python3-matplotlib)
# test_fuzz builds the libFuzzer targets (fuzz/) with Debian's clang-19 and its runtime.
want+=(clang-19 libclang-rt-19-dev)
# The CARAT pass plugin (llvm/) builds against Debian's LLVM 19; test_carat compiles small
# programs with it through exomem-cc.
want+=(llvm-19-dev)
# Debian's HPC Challenge, pulling in Open MPI: bench_hpcc (its RandomAccess checks
# bench_gups), and test_launcher runs it on a 1G-page heap (MPI_Init forks, which is the case).
want+=(hpcc)
# SpaceJMP's applications (issue 11). The in-segment heap is measured against Debian's
# jemalloc and mimalloc; apps/gups' message-passing design runs under Open MPI (mpicc, mpirun);
# apps/kvjmp is compared with redis-server and driven by redis-benchmark/redis-cli
# (redis-tools); apps/samjmp reads SAM/BAM with htslib and is checked against samtools on the
# small files of samtools-test and htslib-test. The report makes its reads with dwgsim (the
# wgsim descendant Debian packages) and aligns them with minimap2.
want+=(libjemalloc-dev libmimalloc-dev libopenmpi-dev openmpi-bin redis-tools)
want+=(libhts-dev samtools samtools-test htslib-test)
[ "${1:-test}" = report ] && want+=(minimap2)
# bench_launcher: hugectl (libhugetlbfs-bin) preloads "libhugetlbfs.so", a name only
# libhugetlbfs-dev provides; xz is its second program (hpcc is listed above).
[ "${1:-test}" = report ] && want+=(libhugetlbfs-bin libhugetlbfs-dev)
# CARAT on real programs: Debian's own source packages, fetched with apt-get source (a
# private apt configuration signed by Debian's archive keyring, unpacked by dpkg-source) and
# built with their own build systems; test_carat_programs builds bzip2, xz-utils and
# minimap2 (multi-threaded; Debian builds its SIMD kernels with SIMDe, and its reads are
# simulated with dwgsim, which the report's SAM data uses too), the report also sqlite3
# (its Tcl tests), oniguruma, jq and lua5.4 (bench/carat/programs/).
want+=(dpkg-dev debian-archive-keyring autoconf automake libtool)
want+=(zlib1g-dev libsimde-dev dwgsim)
[ "${1:-test}" = report ] && want+=(tcl8.6-dev libonig-dev)
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo=sudo
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
