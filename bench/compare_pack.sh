#!/usr/bin/env bash
# Packed batches against padded ones in training, in one run: every row runs both sides in turns
# (bench/compare_rows.sh), so both see the same load. Sides:
#   packed: the default (each batch's sequences end to end, no padding computed)
#   padded: the same command with --no-pack
# Rows: translator training tokens/s on the shipped Multi30k (length-bucketed batches, as it
# trains), at 1 and THREADS threads; the IMDB classifier with --blocks 2 --mask-padding (batches
# drawn at random, as it trains) in samples/s, on the full labelled IMDB of ../shared/data, its
# test split cut to 200 reviews (the row times training only). Prints the medians and the ratios
# packed / padded of the rates (> 1: packed is faster); raw lines in bench/results/pack_<time>.jsonl.
#   bash bench/compare_pack.sh
# Environment: RUNS (5), STEPS (60: translator steps), CSTEPS (30: classifier steps), THREADS (2),
# IMDB (an aclImdb folder with train/ and test/; default: unpacked from ../shared/data into a
# temporary folder).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-5} steps=${STEPS:-60} csteps=${CSTEPS:-30} threads=${THREADS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build -j"$(nproc)" --target attn_cli >/dev/null
imdb=${IMDB:-}
if [[ -z $imdb ]]; then
  tar xzf ../shared/data/imdb/aclImdb_v1_labelled.tar.gz -C "$tmp"
  imdb=$tmp/aclImdb
fi
# the full training split beside a test split of 100 reviews per label
mkdir -p "$tmp/imdb/test/pos" "$tmp/imdb/test/neg"
ln -s "$(readlink -f "$imdb/train")" "$tmp/imdb/train"
for label in pos neg; do
  find "$imdb/test/$label" -name '*.txt' | sort | sed -n 1,100p | xargs cp -t "$tmp/imdb/test/$label" # sed reads all: no SIGPIPE under pipefail
done

sides=(packed padded)
declare -A cmd=([packed]=build/attn [padded]=build/attn)
mkdir -p bench/results
out=bench/results/pack_$(date -u +%Y%m%dT%H%MZ).jsonl
source bench/compare_rows.sh
opts[padded]=--no-pack

classifier_row() { # the median samples/s of `runs` runs of `csteps` steps
  training_row "classifier 2 blocks, $threads thread(s)" smp/s samples \
    "classify train --data $tmp/imdb --blocks 2 --mask-padding --max-steps $csteps --epochs 1 --threads $threads"
}

echo "this tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', with changes')): packed batches" \
     "against --no-pack; medians of $runs runs in turns, $(date -u +%Y-%m-%dT%H:%MZ);" \
     "$(lscpu | sed -nE 's/^Model name: +//p'), family $(lscpu | sed -nE 's/^CPU family: +//p')"
table_header
translator_row 1
translator_row "$threads"
classifier_row
echo "(raw lines: $out)"
