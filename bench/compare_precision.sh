#!/usr/bin/env bash
# --matmul-precision medium (bf16 operands, float32 sums, where the CPU has AVX512_BF16) against
# highest (float32) on one build, in one run: every row runs both in turns (bench/compare_rows.sh),
# so both see the same load. Rows: sdpa forward and forward+backward at each L (B 8, H 8, d 64),
# the encoder-layer training step and translator training tokens/s. Prints the medians and the
# ratios (> 1: medium is faster), and writes the raw lines to bench/results/precision_<time>.jsonl.
#   bash bench/compare_precision.sh [L ...]      (default L: 512 1024 2048 4096)
# Environment: RUNS (5), STEPS (60: translator steps), THREADS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
lens=("$@"); [[ ${#lens[@]} -gt 0 ]] || lens=(512 1024 2048 4096)
runs=${RUNS:-5} steps=${STEPS:-60} threads=${THREADS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF >/dev/null && cmake --build build -j"$(nproc)" --target attn_cli >/dev/null
build/attn --version | grep -q "medium: bf16" || echo "compare_precision: no bf16 products on this CPU: both sides run float32" >&2
sides=(medium highest)
declare -A cmd=([medium]=build/attn [highest]=build/attn)
mkdir -p bench/results
out=bench/results/precision_$(date -u +%Y%m%dT%H%MZ).jsonl
source bench/compare_rows.sh
opts=([medium]="--matmul-precision medium" [highest]="--matmul-precision highest")

echo "this tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', with changes')): --matmul-precision medium" \
     "against highest; $threads threads, medians of $runs runs in turns, $(date -u +%Y-%m-%dT%H:%MZ);" \
     "$(lscpu | sed -nE 's/^Model name: +//p'), family $(lscpu | sed -nE 's/^CPU family: +//p'); $(build/attn --version | tail -1)"
table_header
for L in "${lens[@]}"; do
  for mode in fwd fwdbwd; do bench_row "sdpa L=$L $mode" "sdpa --L $L --mode $mode --impl fused"; done
done
bench_row "encoder train step" "encoder"
translator_row "$threads"
echo "(raw lines: $out)"
