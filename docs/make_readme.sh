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
  diff -u README.md "$out" || { echo "make_readme: README.md is not current; run docs/make_readme.sh" >&2; exit 1; }
else
  cp "$out" README.md
fi
