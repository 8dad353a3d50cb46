#!/usr/bin/env bash
# Rewrites the generated blocks of README.md, so what it shows cannot go stale:
#   <!-- run: ARGS -->   ... <!-- end -->   "$ attn ARGS" and what the program prints on stdout, indented
#   <!-- file: PATH -->  ... <!-- end -->   the file, in a ```c block
# Commands run in an empty temporary folder (files they write are thrown away).
# Usage: docs/make_readme.sh [ATTN_BIN]          rewrite README.md
#        docs/make_readme.sh --check [ATTN_BIN]  exit 1, with a diff, when README.md is not current
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C.UTF-8 # the notes in English whatever the locale (attn tour --lang auto)
root=$PWD
check=0
if [[ ${1:-} == --check ]]; then check=1; shift; fi
bin=${1:-build/attn}
[[ $bin == /* ]] || bin=$root/$bin
[[ -x $bin ]] || { echo "make_readme: no program at $bin" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

out=$work/README.md
skipping=0
while IFS= read -r line || [[ -n $line ]]; do
  if ((skipping)); then
    [[ $line == "<!-- end -->" ]] && { skipping=0; printf '%s\n' "$line" >> "$out"; }
    continue
  fi
  printf '%s\n' "$line" >> "$out"
  if [[ $line =~ ^'<!-- run: '(.*)' -->'$ ]]; then
    args=${BASH_REMATCH[1]}
    mkdir -p "$work/run" && rm -rf "$work/run"/*
    printf '    $ attn %s\n' "$args" >> "$out"
    # shellcheck disable=SC2086 # ARGS are words, as typed in the README
    if ! (cd "$work/run" && "$bin" $args) > "$work/output" 2> "$work/errors"; then
      echo "make_readme: \`attn $args\` failed:" >&2; cat "$work/errors" >&2; exit 1
    fi
    sed -e 's/^/    /' -e 's/[[:space:]]*$//' "$work/output" >> "$out"
    skipping=1
  elif [[ $line =~ ^'<!-- file: '(.*)' -->'$ ]]; then
    { echo '```c'; cat "${BASH_REMATCH[1]}"; echo '```'; } >> "$out"
    skipping=1
  fi
done < README.md
if ((check)); then
  # The program's numbers on another CPU may round the other way where a value lies within a few
  # ulps of a printed rounding boundary (the README's are this project's, from one machine): a
  # decimal one unit of its last digit away reads as the same, and is said; anything else fails.
  if ! diff -q README.md "$out" >/dev/null; then
    python3 - README.md "$out" <<'PY' || { diff -u README.md "$out"; echo "make_readme: README.md is not current; run docs/make_readme.sh" >&2; exit 1; }
import re, sys
number = re.compile(r"-?\d+\.\d+")
a, b = (open(p, encoding="utf-8").read().splitlines() for p in sys.argv[1:3])
def same(x, y):
    if x == y:
        return True
    nx, ny = number.findall(x), number.findall(y)
    if number.sub("#", x) != number.sub("#", y) or len(nx) != len(ny):
        return False
    for u, v in zip(nx, ny):
        d = len(u.split(".")[1])
        if d != len(v.split(".")[1]) or abs(round((float(u) - float(v)) * 10 ** d)) > 1:
            return False
    return True
bad = [i for i, (x, y) in enumerate(zip(a, b)) if not same(x, y)]
if len(a) != len(b) or bad:
    sys.exit(1)
print(f"make_readme: README.md is current (a last digit one unit apart on {sum(x != y for x, y in zip(a, b))} line(s))")
PY
  fi
else
  cp "$out" README.md
fi
