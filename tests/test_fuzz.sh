#!/usr/bin/env bash
# The registry's parsers under libFuzzer (fuzz/, docs/hacking.md "Fuzzing"): segment and VAS
# records, name links and the id counter, the in-segment heap's header. Builds the library
# and the targets with clang-19 (ASan + UBSan + fuzzer coverage) in $EXOMEM_BUILD/fuzz,
# seeds each target with the real files of a fresh registry, and runs each for
# FUZZ_SECONDS (default 12). Any crash, leak, sanitizer report or hang (5 s) fails.
# CI's ASan and Release passes skip it: it runs once, in make test (its build is sanitized).
set -u
src=${EXOMEM_SRC:?} build=${EXOMEM_BUILD:?}
seconds=${FUZZ_SECONDS:-12}
case "$build" in *-asan|*-release) echo "run once, by make test (the fuzz build is sanitized already)"; exit 77;; esac
cc=$(command -v clang-19) || { [ "${CI:-}" = true ] && { echo "no clang-19 under CI"; exit 1; }
                              echo "no clang-19: skipped"; exit 77; }
out=$build/fuzz
mkdir -p "$out"
CC=$cc cmake -S "$src" -B "$out" -DEXOMEM_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null ||
    exit 1
targets="seg_record vas_record name_link heap_header"
cmake --build "$out" -j2 $(for t in $targets; do echo --target fuzz_$t; done) >"$out/build.log" 2>&1 ||
    { tail -30 "$out/build.log"; exit 1; }
work=$(mktemp -d /dev/shm/exomem-fuzzwork-XXXXXX)
trap 'rm -rf "$work"' EXIT
status=0
for t in $targets; do
    mkdir -p "$work/$t/seeds" "$work/$t/corpus"
    bin=$out/fuzz/fuzz_$t
    # One run over an empty input writes the seed (the real file) into seeds/.
    : >"$work/$t/empty"
    EXOMEM_FUZZ_DIR=$work EXOMEM_FUZZ_SEEDS=$work/$t/seeds "$bin" "$work/$t/empty" \
        >/dev/null 2>&1
    (cd "$work/$t" && EXOMEM_FUZZ_DIR=$work "$bin" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 \
        -print_final_stats=1 corpus seeds >log 2>&1)
    rc=$?
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t/log" | grep -o '[0-9]*$')
    echo "fuzz_$t: ${runs:-?} executions in ${seconds}s, exit $rc"
    if [ $rc -ne 0 ]; then
        grep -E 'ERROR|SUMMARY|==[0-9]+==' "$work/$t/log" | head -20
        mkdir -p "$out/findings/$t"
        cp "$work/$t"/crash-* "$work/$t"/timeout-* "$work/$t"/leak-* "$out/findings/$t/" \
            2>/dev/null
        echo "inputs kept in $out/findings/$t (reproduce: $bin FILE)"
        status=1
    elif ls -d "$work"/exomem-fuzz-* 2>/dev/null; then
        echo "fuzz_$t left its registry behind"
        status=1
    fi
    rm -rf "$work"/exomem-fuzz-*
done
exit $status
