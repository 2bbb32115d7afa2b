#!/usr/bin/env bash
# Every function declared in include/exomem/*.h has a doc comment (the comment block right
# above it, or above the group of declarations it belongs to), and the comment of every call
# that can fail names its signed error codes ("-EXO_...") or says "as <other call>" / "never
# fails" (docs/hacking.md, "Doc comments").
here=$(cd "$(dirname "$0")/.." && pwd)
exec python3 - "$here"/include/exomem/*.h <<'PY'
import re, sys
bad = []
proto = re.compile(r'^(?!typedef|#|struct\b|enum\b|static\b|extern\b)[A-Za-z_][\w \*]*?\b(\w+)\(')
for path in sys.argv[1:]:
    lines = open(path).read().split('\n')
    for i, line in enumerate(lines):
        m = proto.match(line)
        if not m:
            continue
        name = m.group(1)
        j = i - 1
        # Skip the other declarations of a group (and their continuation lines).
        while j >= 0 and lines[j].strip() and not lines[j].rstrip().endswith('*/'):
            j -= 1
        if j < 0 or not lines[j].rstrip().endswith('*/'):
            bad.append(f"{path}:{i+1}: {name} has no doc comment")
            continue
        k = j
        while k >= 0 and '/*' not in lines[k]:
            k -= 1
        comment = re.sub(r'[\s*]+', ' ', ' '.join(lines[k:j+1]))
        returns = line.split(name)[0]
        if returns.strip() in ('void', 'const char *', 'size_t') or 'vhandle_t' in returns:
            continue
        if not re.search(r'-EXO_|[Nn]ever fails|[Ee]rrors as|1 if', comment):
            bad.append(f"{path}:{i+1}: {name}'s comment names no error code (-EXO_...)")
for b in bad:
    print(b)
print(f"test_doc_comments: {'FAILED' if bad else 'ok'}")
sys.exit(1 if bad else 0)
PY
