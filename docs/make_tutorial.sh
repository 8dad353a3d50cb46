#!/usr/bin/env bash
# Regenerates what docs/tutorial.md and docs/tutorial.zh-CN.md show of `attn tour`: the pictures
# in docs/tour/ and, after every line "<!-- tour STEP -->", a block with the command and what it
# prints: `attn tour STEP` in English, `attn tour STEP --lang zh-CN` in the Chinese tutorial.
# tests/test_tour.c and tests/test_tour_imdb.c hold the English blocks against a fresh run,
# tests/docs_commands.py the Chinese ones (it runs every command the docs show).
# Usage: bash docs/make_tutorial.sh   (after building build/; ATTN_BIN=path overrides the program)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=${ATTN_BIN:-$root/build/attn}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir -p docs/tour
rm -f docs/tour/*.png
mkdir -p "$tmp/en" "$tmp/zh-CN" "$tmp/zh-pictures"
for step in $("$bin" tour --list | cut -d' ' -f1); do
  (cd docs/tour && "$bin" tour "$step" --lang en --data "$root/data/aclImdb_mini") > "$tmp/en/${step//\//_}.txt"
  (cd "$tmp/zh-pictures" && "$bin" tour "$step" --lang zh-CN --data "$root/data/aclImdb_mini") \
    > "$tmp/zh-CN/${step//\//_}.txt"
done

for lang in en zh-CN; do
  doc=docs/tutorial.md option=
  [[ $lang == zh-CN ]] && doc=docs/tutorial.zh-CN.md option=" --lang zh-CN"
  awk -v dir="$tmp/$lang" -v option="$option" '
    opening && /^```/ { opening = 0; skipping = 1; next }   # the old block: dropped
    { opening = 0 }
    skipping { if ($0 == "```") skipping = 0; next }
    { print }
    /^<!-- tour [^ ]+ -->$/ {
      step = $3; name = step; gsub("/", "_", name); path = dir "/" name ".txt"
      print "```text"
      print "$ attn tour " step option
      while ((getline line < path) > 0) print line
      close(path)
      print "```"
      opening = 1
    }
  ' "$doc" > "$tmp/doc"
  cat "$tmp/doc" > "$doc"
done
