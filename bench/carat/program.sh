#!/bin/bash
# program.sh RECIPE ACTION DIR: run one step of a CARAT evaluation program (a recipe in
# bench/carat/programs/) in DIR, a private copy of the program's Debian source tree.
#   ACTION  build     build with $CC $CFLAGS $LDFLAGS (exomem-cc, clang-19, or clang-19 with ASan)
#           suite     run the program's own test suite; exit status 0 when it passes
#           workload  the timed run (a few seconds with the plain build); exit status 0 on success
# The recipe is sourced; it sets DEB_SOURCE and defines build_program, run_suite and
# run_workload (bench/carat/programs/README.md). JOBS is the make parallelism.
set -euo pipefail
recipe=$1
action=$2
dir=$3
: "${CC:?CC must be set}" "${CFLAGS=-O2 -g}" "${LDFLAGS=}" "${JOBS:=2}"
export CC CFLAGS LDFLAGS JOBS
# shellcheck source=/dev/null
. "$recipe"
cd "$dir"
case "$action" in
  build) build_program ;;
  suite) run_suite ;;
  workload) run_workload ;;
  *) echo "program.sh: unknown action '$action' (build, suite or workload)" >&2; exit 2 ;;
esac
