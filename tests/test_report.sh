#!/usr/bin/env bash
# bench/run.py's own check: aggregation arithmetic (median/min/max/ratio), the Table 2
# verdicts, and that results.json, index.html and the PNGs get written (to a temp dir).
# Runs no benchmark. Skips (77) without python3 or matplotlib, except under CI (CI=true),
# where make test installs both: a check that always skips there would be no check.
set -u
src=${EXOMEM_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
# The report uses Debian's python3 (Makefile: PYTHON=/usr/bin/python3); fall back to PATH's.
py=${PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=$(command -v python3 2>/dev/null) || { echo "no python3: skipped"; exit 77; }
if ! "$py" -c 'import matplotlib' 2>/dev/null; then
    [ "${CI:-}" = true ] && { echo "$py has no matplotlib, and CI must run this check"; exit 1; }
    echo "$py has no matplotlib: skipped"; exit 77
fi
exec "$py" "$src/bench/run.py" --selftest
