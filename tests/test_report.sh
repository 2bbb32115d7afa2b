#!/usr/bin/env bash
# bench/run.py's own check: aggregation arithmetic (median/min/max/ratio), the Table 2
# verdicts, and that results.json, index.html and the PNGs get written (to a temp dir).
# Runs no benchmark. Skips (77) without python3 or matplotlib.
set -u
src=${EXOMEM_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
# The report uses Debian's python3 (Makefile: PYTHON=/usr/bin/python3); fall back to PATH's.
py=${PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=$(command -v python3 2>/dev/null) || { echo "no python3: skipped"; exit 77; }
"$py" -c 'import matplotlib' 2>/dev/null || { echo "$py has no matplotlib: skipped"; exit 77; }
exec "$py" "$src/bench/run.py" --selftest
