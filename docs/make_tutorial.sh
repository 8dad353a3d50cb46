#!/usr/bin/env bash
# Regenerates what docs/tutorial.md and docs/tutorial.zh-CN.md show of `attn tour`: the pictures
# in docs/tour/ and, after every line "<!-- tour STEP -->", a block with the command and what it
# prints. tests/test_tour.c and tests/test_tour_imdb.c hold the blocks against a fresh run.
# Usage: bash docs/make_tutorial.sh   (after building build/; ATTN_BIN=path overrides the program)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=${ATTN_BIN:-$root/build/attn}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir -p docs/tour
rm -f docs/tour/*.png
for step in $("$bin" tour --list | cut -d' ' -f1); do
  (cd docs/tour && "$bin" tour "$step" --data "$root/data/aclImdb_mini") > "$tmp/${step//\//_}.txt"
done

for doc in docs/tutorial.md docs/tutorial.zh-CN.md; do
  awk -v dir="$tmp" '
    opening && /^```/ { opening = 0; skipping = 1; next }   # the old block: dropped
    { opening = 0 }
    skipping { if ($0 == "```") skipping = 0; next }
    { print }
    /^<!-- tour [^ ]+ -->$/ {
      step = $3; name = step; gsub("/", "_", name); path = dir "/" name ".txt"
      print "```text"
      print "$ attn tour " step
      while ((getline line < path) > 0) print line
      close(path)
      print "```"
      opening = 1
    }
  ' "$doc" > "$tmp/doc"
  cat "$tmp/doc" > "$doc"
done
