#!/usr/bin/env bash
# Decoding speed and identity on a trained translator: attn_seq2seq_decode's cached decoder against
# its reference twin (ATTN_SEQ2SEQ_DECODE_RECOMPUTE: the whole prefix again at every step) and, given BASE_REV, against the decoder of that git revision (e.g. the last commit
# before the cache, ccb5c06), built from `git archive` in a temporary folder. Every decoder runs
# bench_decode on the whole split as `attn translate eval` decodes it (greedy over batches of 100,
# beam search per sentence, max_out = source length + 10), one after the other, same checkpoint,
# same threads, RUNS times each in turns; the timing covers the decoding calls alone.
# Prints per search the median sentences/s of each decoder (wall clock) and its CPU seconds, the
# ratios of the cached decoder to each other (on the machine shared with other work, the CPU
# time ratio is the steadier one), and how many sentences' tokens differ from the cached one's.
#   bash bench/decode_speed.sh CHECKPOINT [BASE_REV]
# Environment: THREADS (2), BEAMS ("1 4"; 1 = greedy), RUNS (1), DATA (data/multi30k),
# SPLIT (test_2016_flickr), SRC/TGT (en, fr), LIMIT (the first N sentences; default all). Train a checkpoint first, e.g.
#   build/attn translate train --budget-min 8 --checkpoint /tmp/decode_ck.safetensors
set -euo pipefail
cd "$(dirname "$0")/.."
ck=${1:?usage: bash bench/decode_speed.sh CHECKPOINT [BASE_REV]}
base=${2:-}
threads=${THREADS:-2} beams=${BEAMS:-1 4} runs=${RUNS:-1}
args=(--checkpoint "$ck" --data "${DATA:-data/multi30k}" --split "${SPLIT:-test_2016_flickr}"
      --src "${SRC:-en}" --tgt "${TGT:-fr}" --threads "$threads" ${LIMIT:+--limit "$LIMIT"})
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF >/dev/null
cmake --build build -j"$(nproc)" --target bench_decode >/dev/null
decoders=("cached build/bench_decode --decoder default" "ref build/bench_decode --decoder ref")
if [[ -n $base ]]; then # the other revision's library, this benchmark program
  rev=$(git rev-parse --short "$base")
  mkdir "$tmp/base"
  git archive "$rev" | tar -x -C "$tmp/base"
  cp bench/bench_decode.c "$tmp/base/bench/"
  cmake -S "$tmp/base" -B "$tmp/base/build" -DCMAKE_BUILD_TYPE=Release -DATTN_BUILD_TESTS=OFF \
        -DCMAKE_C_FLAGS=-DBENCH_DECODE_DEFAULT_ONLY >/dev/null
  cmake --build "$tmp/base/build" -j"$(nproc)" --target bench_decode >/dev/null
  decoders+=("base-$rev $tmp/base/build/bench_decode")
fi

field() { sed -nE "s/.*\"$1\":([0-9.]+).*/\\1/p" <<<"$2"; }
median() { sort -g | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "decoding ${SPLIT:-test_2016_flickr} with $ck, $threads threads, $runs run(s) per decoder, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for beam in $beams; do
  search="beam $beam"; [[ $beam == 1 ]] && search=greedy
  for ((run = 1; run <= runs; run++)); do
    for d in "${decoders[@]}"; do
      name=${d%% *} cmd=${d#* }
      line=$($cmd "${args[@]}" --beam "$beam" --out "$tmp/$name.$beam.tokens")
      field sentences_per_s "$line" >>"$tmp/$name.$beam.rates"
      field cpu_seconds "$line" >>"$tmp/$name.$beam.cpu"
      sentences=$(field sentences "$line")
    done
  done
  rate0=$(median <"$tmp/cached.$beam.rates") cpu0=$(median <"$tmp/cached.$beam.cpu")
  printf '%-8s %-14s %12s %12s %10s %10s %s\n' search decoder sentences/s "CPU s" "x wall" "x CPU" "sentences differing"
  for d in "${decoders[@]}"; do
    name=${d%% *}
    rate=$(median <"$tmp/$name.$beam.rates") cpu=$(median <"$tmp/$name.$beam.cpu")
    differ=$(paste -d'|' "$tmp/cached.$beam.tokens" "$tmp/$name.$beam.tokens" | awk -F'|' '$1 != $2' | wc -l)
    printf '%-8s %-14s %12.2f %12.2f %10.2f %10.2f %d of %s\n' "$search" "$name" "$rate" "$cpu" \
           "$(awk "BEGIN {print $rate0 / $rate}")" "$(awk "BEGIN {print $cpu / $cpu0}")" "$differ" "$sentences"
  done
done
echo "x wall, x CPU: how many times faster the cached decoder is (sentences/s, CPU seconds)"
