#!/usr/bin/env bash
# This tree against an earlier revision on this machine, in one run: the earlier revision is
# built from `git archive` in a temporary folder, and every row runs both programs in turns
# (ours, then theirs, RUNS times), so both see the same load. Rows:
#   - `attn bench` workloads: sdpa forward and forward+backward, causal and not, at each L; the
#     mha, encoder-layer and classifier training steps (each `attn bench` run is itself a median
#     of --runs timed runs after a warm-up);
#   - translator training: `attn translate train --max-steps STEPS` on the shipped Multi30k with
#     the default model, tokens/s of its epoch line (2 threads and 1).
# Prints a table of medians and the ratio base / this tree (> 1: this tree is faster), and writes
# the raw lines to bench/results/commits_<base>_<time>.jsonl.
#   bash bench/compare_commits.sh BASE_REV [L ...]     (default L: 512 1024 2048)
# Environment: RUNS (3), STEPS (60: translator steps), THREADS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: bash bench/compare_commits.sh BASE_REV [L ...]}
shift
lens=("$@"); [[ ${#lens[@]} -gt 0 ]] || lens=(512 1024 2048)
runs=${RUNS:-3} steps=${STEPS:-60} threads=${THREADS:-2}
rev=$(git rev-parse --short "$base")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build -j"$(nproc)" --target attn_cli >/dev/null
mkdir "$tmp/base"
git archive "$rev" | tar -x -C "$tmp/base"
cmake -S "$tmp/base" -B "$tmp/base/build" -DCMAKE_BUILD_TYPE=Release -DATTN_BUILD_TESTS=OFF >/dev/null
cmake --build "$tmp/base/build" -j"$(nproc)" --target attn_cli >/dev/null
declare -A bins=([this]=build/attn [base]=$tmp/base/build/attn)
mkdir -p bench/results
out=bench/results/commits_${rev}_$(date -u +%Y%m%dT%H%MZ).jsonl

median() { sort -g | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "nan" }'; }
declare -A value

bench_row() { # label, attn bench arguments: the median t_med (ms) of RUNS runs of each program
  local label=$1 args=$2 who r line
  for who in this base; do : > "$tmp/values_$who"; done
  for ((r = 0; r < runs; r++)); do
    for who in this base; do
      # shellcheck disable=SC2086 # the arguments are words
      line=$("${bins[$who]}" bench $args --threads "$threads" --json | tail -1)
      printf '{"row":"%s","who":"%s","result":%s}\n' "$label" "$who" "$line" >> "$out"
      sed -nE 's/.*"t_med":([0-9.e+-]+).*/\1/p' <<<"$line" | awk '{ print $1 * 1000 }' >> "$tmp/values_$who"
    done
  done
  for who in this base; do value[$label,$who]=$(median < "$tmp/values_$who"); done
  printf '| %-34s | %10.1f ms | %10.1f ms | %5.2fx |\n' "$label" "${value[$label,this]}" "${value[$label,base]}" \
    "$(awk -v a="${value[$label,base]}" -v b="${value[$label,this]}" 'BEGIN { print a / b }')"
}

translator_row() { # threads: the median tokens/s of RUNS runs of each program
  local n=$1 label="translator train, $1 thread(s)" who r line
  for who in this base; do : > "$tmp/values_$who"; done
  for ((r = 0; r < runs; r++)); do
    for who in this base; do
      line=$("${bins[$who]}" translate train --max-steps "$steps" --threads "$n" --epochs 1 --beam 1 --eval-limit 1 \
               --checkpoint "$tmp/t_$who.safetensors" 2>/dev/null | grep -E '^epoch 1' | tail -1)
      rm -f "$tmp"/t_"$who".safetensors*
      printf '{"row":"%s","who":"%s","line":"%s"}\n' "$label" "$who" "$line" >> "$out"
      sed -nE 's/.* ([0-9]+) tokens\/s.*/\1/p' <<<"$line" >> "$tmp/values_$who"
    done
  done
  for who in this base; do value[$label,$who]=$(median < "$tmp/values_$who"); done
  printf '| %-34s | %8.0f tok/s | %8.0f tok/s | %5.2fx |\n' "$label" "${value[$label,this]}" "${value[$label,base]}" \
    "$(awk -v a="${value[$label,base]}" -v b="${value[$label,this]}" 'BEGIN { print b / a }')"
}

echo "this tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', with changes')) against $rev;" \
     "$threads threads, medians of $runs runs in turns, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "| row | this tree | $rev | speed-up |"
echo "|---|---|---|---|"
for L in "${lens[@]}"; do
  for causal in "" --causal; do
    for mode in fwd fwdbwd; do
      bench_row "sdpa L=$L ${causal:+causal }$mode" "sdpa --L $L $causal --mode $mode --impl fused"
    done
  done
done
for w in mha encoder classifier; do bench_row "$w train step" "$w"; done
translator_row 2
translator_row 1
echo "(raw lines: $out)"
