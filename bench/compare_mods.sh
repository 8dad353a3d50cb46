#!/usr/bin/env bash
# The score and mask callbacks (attn_score_mods, `attn bench sdpa --mods`) against the built-in
# forms of the same features, on one build, in one run: each row runs both in turns
# (bench/compare_rows.sh), so both see the same load. Rows: causal, a window of 256 keys, ALiBi and
# softcap 30, forward and forward+backward at each L (B 8, H 8, d 64, the fused kernel); the
# callbacks are the ones a user would write (cli/cmd_bench.c: the masks with a block predicate).
# Prints the medians and the ratios (> 1: the callbacks are slower), and writes the raw lines to
# bench/results/mods_<time>.jsonl.
#   bash bench/compare_mods.sh [L ...]      (default L: 1024 2048)
# Environment: RUNS (3: rounds of the two sides), THREADS (2), BUILD (build: the build folder,
# configured and built here as the release build), ATTN (a built attn to time instead, unchanged
# while others build: no build here), PRECISION (highest, or medium).
set -euo pipefail
cd "$(dirname "$0")/.."
lens=("$@"); [[ ${#lens[@]} -gt 0 ]] || lens=(1024 2048)
runs=${RUNS:-3} threads=${THREADS:-2} build=${BUILD:-build} precision=${PRECISION:-highest}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

attn=${ATTN:-}
if [[ -z $attn ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF >/dev/null &&
    cmake --build "$build" -j"$(nproc)" --target attn_cli >/dev/null
  attn=$build/attn
fi
sides=(built-in callbacks)
declare -A cmd=([built-in]="$attn" [callbacks]="$attn")
mkdir -p bench/results
out=bench/results/mods_$(date -u +%Y%m%dT%H%MZ).jsonl
source bench/compare_rows.sh
opts=([built-in]="--matmul-precision $precision" [callbacks]="--matmul-precision $precision --mods")

echo "this tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', with changes')): score and mask callbacks" \
     "against the built-in forms at --matmul-precision $precision; $threads threads, medians of $runs runs in turns," \
     "$(date -u +%Y-%m-%dT%H:%MZ); $(lscpu | sed -nE 's/^Model name: +//p'), family" \
     "$(lscpu | sed -nE 's/^CPU family: +//p'); $("$attn" --version | tail -1)"
table_header
for L in "${lens[@]}"; do
  for feature in "--causal" "--window 255,0" "--alibi" "--softcap 30"; do
    for mode in fwd fwdbwd; do
      bench_row "L=$L $feature $mode" "sdpa --L $L $feature --mode $mode --impl fused --runs 3 --warmup 1"
    done
  done
done
echo "(raw lines: $out)"
