#!/usr/bin/env bash
# This tree against an earlier revision on this machine, in one run: the earlier revision is
# built from `git archive` in a temporary folder, and every row runs both programs in turns
# (ours, then theirs, RUNS times), so both see the same load. Rows:
#   - `attn bench` workloads: sdpa forward and forward+backward, causal and not, at each L; the
#     mha, encoder-layer and classifier training steps (each `attn bench` run is itself a median
#     of --runs timed runs after a warm-up);
#   - translator training: `attn translate train --max-steps STEPS` on the shipped Multi30k with
#     the default model, tokens/s of its epoch line (2 threads and 1).
# Prints a table of medians and the ratio base / this tree (> 1: this tree is faster; the rows are
# bench/compare_rows.sh's), and writes the raw lines to bench/results/commits_<base>_<time>.jsonl.
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

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF >/dev/null && cmake --build build -j"$(nproc)" --target attn_cli >/dev/null
mkdir "$tmp/base"
git archive "$rev" | tar -x -C "$tmp/base"
cmake -S "$tmp/base" -B "$tmp/base/build" -DCMAKE_BUILD_TYPE=Release -DATTN_BUILD_TESTS=OFF >/dev/null
cmake --build "$tmp/base/build" -j"$(nproc)" --target attn_cli >/dev/null
sides=(this base)
declare -A cmd=([this]=build/attn [base]=$tmp/base/build/attn)
mkdir -p bench/results
out=bench/results/commits_${rev}_$(date -u +%Y%m%dT%H%MZ).jsonl
source bench/compare_rows.sh

echo "this tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', with changes')) against $rev;" \
     "$threads threads, medians of $runs runs in turns, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "(this: this tree; base: $rev; \"this vs base\" > 1: this tree is faster)"
table_header
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
