#!/usr/bin/env bash
# Issue 40's rule, "the SDPA forward and training-step rows within 3% of BASE on the same host":
# this tree against BASE_REV, both built here (the base from `git archive`), each row run by both
# programs in turns, ROUNDS times (so both see the same load), `attn bench ROW --json`, itself a
# median of its runs. Rows: sdpa forward at L 1024, causal, with a window of 256 keys, ALiBi and a
# softcap; sdpa forward+backward at L 512; the encoder layer's and the classifier's training steps.
# Prints each row's medians and head/base (< 1: this tree is faster); writes the raw lines to
# bench/results/house_ab_<time>.jsonl.
#   bash bench/house_ab.sh BASE_REV      Environment: ROUNDS (5), THREADS (2)
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: bash bench/house_ab.sh BASE_REV}
rounds=${ROUNDS:-5} threads=${THREADS:-2}
rev=$(git rev-parse --short "$base")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --build build -j"$(nproc)" --target attn_cli >/dev/null
git archive "$rev" | tar -x -C "$tmp"
cmake -S "$tmp" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DATTN_BUILD_TESTS=OFF >/dev/null
cmake --build "$tmp/build" -j"$(nproc)" --target attn_cli >/dev/null
declare -A bin=([head]=build/attn [base]=$tmp/build/attn)
# a window of 256 keys up to the diagonal: "--window 255,0" since 0.3's features table, "--window 256" before
window() { if "$1" bench --help | grep -q 'LEFT,RIGHT'; then echo "--window 255,0"; else echo "--window 256"; fi; }
rows=("sdpa --L 1024" "sdpa --L 1024 --causal" "sdpa --L 1024 WINDOW --alibi --softcap 30" "sdpa --L 512 --mode fwdbwd"
      "encoder" "classifier")
mkdir -p bench/results
out=bench/results/house_ab_$(date -u +%Y%m%dT%H%MZ).jsonl
lscpu_field() { lscpu | sed -n "s/^$1: *//p" | head -1; }
printf '{"tag":"host","cpu":"%s","family":"%s","model":"%s","cores":%d,"base":"%s","head":"%s","command":"ROUNDS=%d THREADS=%d bash bench/house_ab.sh %s"}\n' \
  "$(lscpu_field 'Model name')" "$(lscpu_field 'CPU family')" "$(lscpu_field 'Model')" "$(nproc)" "$rev" \
  "$(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')" "$rounds" "$threads" "$rev" > "$out"
for round in $(seq "$rounds"); do
  for row in "${rows[@]}"; do
    for side in base head; do
      args=${row/WINDOW/$(window "${bin[$side]}")}
      # shellcheck disable=SC2086
      line=$("${bin[$side]}" bench $args --json --threads "$threads" | tail -1)
      printf '{"side":"%s","case":"%s","round":%d,%s\n' "$side" "$row" "$round" "${line#\{}" >> "$out"
    done
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"side"' in l]
print(f"{'row':48} {'base ms':>9} {'head ms':>9} {'head/base':>9}")
for case in dict.fromkeys(r["case"] for r in rows):
    med = {s: statistics.median(r["t_med"] for r in rows if r["case"] == case and r["side"] == s) for s in ("base", "head")}
    print(f"{case:48} {1e3 * med['base']:9.2f} {1e3 * med['head']:9.2f} {med['head'] / med['base']:9.3f}")
PY
echo "raw lines: $out"
