#!/usr/bin/env bash
# Issue 31's speed rows, each pair in turns in one run (bench/compare_rows.sh), one build:
#   a sliding window of 256 keys against full attention at L 16384 (B 1, H 8, d 64), forward and
#   forward + backward, with the arena's peak memory of each (O(L) both: the fused kernel);
#   grouped-query attention, 2 key/value heads against 8 (B 8, H 8, d 64) at each L, forward, at
#   --matmul-precision highest and medium.
# Prints medians and ratios (> 1: the first side is faster); raw lines in
# bench/results/features_<time>.jsonl.
#   bash bench/compare_features.sh [L ...]      (GQA rows' L; default 1024 2048 4096)
# Environment: RUNS (5), THREADS (2), WINDOW_L (16384).
set -euo pipefail
cd "$(dirname "$0")/.."
lens=("$@"); [[ ${#lens[@]} -gt 0 ]] || lens=(1024 2048 4096)
runs=${RUNS:-5} threads=${THREADS:-2} window_l=${WINDOW_L:-16384}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF >/dev/null && cmake --build build -j"$(nproc)" --target attn_cli >/dev/null
mkdir -p bench/results
out=bench/results/features_$(date -u +%Y%m%dT%H%MZ).jsonl
source bench/compare_rows.sh

echo "this tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', with changes')): $threads threads," \
     "medians of $runs runs in turns, $(date -u +%Y-%m-%dT%H:%MZ);" \
     "$(lscpu | sed -nE 's/^Model name: +//p'), family $(lscpu | sed -nE 's/^CPU family: +//p'); $(build/attn --version | sed -n 2p)"

sides=(window full)
declare -A cmd=([window]=build/attn [full]=build/attn [kv2]=build/attn [kv8]=build/attn)
opts=([window]="--window 255,0" [full]="")
table_header
for mode in fwd fwdbwd; do bench_row "sdpa L=$window_l $mode" "sdpa --B 1 --H 8 --L $window_l --d 64 --mode $mode --impl fused"; done
echo "arena peak (MiB), from the raw lines:"
sed -nE 's/.*"row":"([^"]*)","who":"([^"]*)".*"arena_peak_mib":([0-9.]+).*/  \1 \2: \3/p' "$out" | sort -u

for precision in highest medium; do
  echo
  sides=(kv2 kv8)
  opts=([kv2]="--kv-heads 2 --matmul-precision $precision" [kv8]="--matmul-precision $precision")
  table_header
  for L in "${lens[@]}"; do bench_row "sdpa L=$L fwd, $precision" "sdpa --B 8 --H 8 --L $L --d 64 --mode fwd --impl fused"; done
done
echo "(raw lines: $out)"
