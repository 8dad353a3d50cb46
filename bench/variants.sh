#!/usr/bin/env bash
# Seed 002 section 5.1: the classifier's attention layer swapped (softmax, linear, conv,
# additive), each trained the same way on the shipped IMDB mini set; prints a markdown table of
# test accuracy, training samples/s and peak RSS (/usr/bin/time -v).
#   bash bench/variants.sh [extra attn classify train options]
# Defaults: 5 epochs, --max-len 128 (the additive layer evaluates tanh B·L²·h times, so 512 would
# take hours), --additive-hidden 16, seed 0, 2 threads.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| attention | test accuracy | train samples/s (mean of epochs) | peak RSS MiB | parameters |"
echo "|---|---|---|---|---|"
for kind in softmax linear conv additive; do
  /usr/bin/time -v build/attn classify train --attention "$kind" --max-len 128 --additive-hidden 16 \
    --threads 2 --checkpoint "$tmp/$kind.safetensors" "$@" >"$tmp/$kind.log" 2>"$tmp/$kind.err"
  acc=$(sed -nE 's/^test accuracy: ([0-9.]+%).*/\1/p' "$tmp/$kind.log")
  sps=$(sed -nE 's/^epoch [0-9]+: .*, ([0-9.]+) samples\/s/\1/p' "$tmp/$kind.log" | awk '{s+=$1; n++} END {printf "%.1f", s/n}')
  rss=$(sed -nE 's/.*Maximum resident set size \(kbytes\): ([0-9]+)/\1/p' "$tmp/$kind.err" | awk '{printf "%.0f", $1/1024}')
  params=$(sed -nE 's/^model: .*, ([0-9]+) parameters/\1/p' "$tmp/$kind.log")
  echo "| $kind | $acc | $sps | $rss | $params |"
done
