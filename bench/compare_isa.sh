#!/usr/bin/env bash
# The default (portable) build against a -march=native build of this tree, and the levels of the
# portable build's kernels against each other, in one run: every row runs each side in turns
# (bench/compare_rows.sh), so all see the same load. Sides:
#   portable: build/attn at the best level this CPU has (the kernels chosen at run time)
#   native:   build-native/attn (ATTN_NATIVE: everything compiled with -march=native)
#   <level>:  build/attn under ATTN_CPU_ISA=<level>, for each level in LEVELS
# Rows: sdpa forward and forward+backward at each L (B 8, H 8, d 64), the encoder-layer training
# step, and translator training tokens/s. Prints the medians and the ratios against `portable`
# (> 1: the portable build is faster), and writes the raw lines to bench/results/isa_<time>.jsonl.
#   bash bench/compare_isa.sh [L ...]          (default L: 512 1024 2048)
# Environment: RUNS (5), STEPS (60: translator steps), THREADS (2), LEVELS (the levels below the
# best one this CPU has; "" for none).
set -euo pipefail
cd "$(dirname "$0")/.."
lens=("$@"); [[ ${#lens[@]} -gt 0 ]] || lens=(512 1024 2048)
runs=${RUNS:-5} steps=${STEPS:-60} threads=${THREADS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF >/dev/null && cmake --build build -j"$(nproc)" --target attn_cli >/dev/null
cmake -S . -B build-native -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=ON -DATTN_BUILD_TESTS=OFF >/dev/null
cmake --build build-native -j"$(nproc)" --target attn_cli >/dev/null
best=$(build/attn --version | sed -nE 's/^kernels: ([a-z0-9_]+) .*/\1/p')
below=$(build/attn --version | sed -nE 's/^kernels: [a-z0-9_]+ \(of (.*) here;.*/\1/p' | sed -E "s/ ?$best\$//")
levels=${LEVELS-$below}
sides=(portable native)
declare -A cmd=([portable]=build/attn [native]=build-native/attn)
for level in $levels; do sides+=("$level"); cmd[$level]="env ATTN_CPU_ISA=$level build/attn"; done
mkdir -p bench/results
out=bench/results/isa_$(date -u +%Y%m%dT%H%MZ).jsonl
source bench/compare_rows.sh

echo "this tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', with changes')): the portable build" \
     "(kernels at $best) against -march=native and the lower levels; $threads threads, medians of $runs runs in" \
     "turns, $(date -u +%Y-%m-%dT%H:%MZ); $(lscpu | sed -nE 's/^Model name: +//p'), family" \
     "$(lscpu | sed -nE 's/^CPU family: +//p')"
table_header
for L in "${lens[@]}"; do
  for mode in fwd fwdbwd; do bench_row "sdpa L=$L $mode" "sdpa --L $L --mode $mode --impl fused"; done
done
bench_row "encoder train step" "encoder"
translator_row "$threads"
echo "(raw lines: $out)"
