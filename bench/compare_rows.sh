# Rows that run several programs ("sides") in turns, so that all see the same load; sourced by
# bench/compare_commits.sh (this tree against an earlier revision) and bench/compare_isa.sh (the
# levels of one build, and a -march=native build). The caller sets:
#   sides: the labels, in the table's order; the first is the one every other is compared with
#   cmd[LABEL]: the words that run that side's attn (env VAR=... allowed)
#   opts[LABEL]: options that side adds to every command (optional: --matmul-precision medium)
#   runs, steps (translator steps), threads, out (a .jsonl file for the raw lines), tmp (a folder)
# Each row prints the median of `runs` runs per side and, for every side after the first, the
# ratio side / first of times (> 1: the first is faster) or first / side of tokens/s (the same).

declare -A opts
median() { sort -g | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "nan" }'; }
declare -A value

table_header() {
  local side line="| row |" rule="|---|"
  for side in "${sides[@]}"; do line+=" $side |"; rule+="---|"; done
  for side in "${sides[@]:1}"; do line+=" ${sides[0]} vs $side |"; rule+="---|"; done
  echo "$line"; echo "$rule"
}

# label, unit, then for each side its median: one table line with the ratios
table_line() {
  local label=$1 unit=$2 side line
  line=$(printf '| %-34s |' "$label")
  for side in "${sides[@]}"; do line+=$(printf ' %10.1f %s |' "${value[$label,$side]}" "$unit"); done
  for side in "${sides[@]:1}"; do
    if [[ $unit == ms ]]; then
      line+=$(awk -v a="${value[$label,$side]}" -v b="${value[$label,${sides[0]}]}" 'BEGIN { printf " %5.3fx |", a / b }')
    else
      line+=$(awk -v a="${value[$label,${sides[0]}]}" -v b="${value[$label,$side]}" 'BEGIN { printf " %5.3fx |", a / b }')
    fi
  done
  echo "$line"
}

bench_row() { # label, attn bench arguments: the median t_med (ms) of `runs` runs of each side
  local label=$1 args=$2 side r line
  for side in "${sides[@]}"; do : > "$tmp/values_$side"; done
  for ((r = 0; r < runs; r++)); do
    for side in "${sides[@]}"; do
      # shellcheck disable=SC2086 # the command and the arguments are words
      line=$(${cmd[$side]} bench $args ${opts[$side]:-} --threads "$threads" --json | tail -1)
      printf '{"row":"%s","who":"%s","result":%s}\n' "$label" "$side" "$line" >> "$out"
      sed -nE 's/.*"t_med":([0-9.e+-]+).*/\1/p' <<<"$line" | awk '{ print $1 * 1000 }' >> "$tmp/values_$side"
    done
  done
  for side in "${sides[@]}"; do value[$label,$side]=$(median < "$tmp/values_$side"); done
  table_line "$label" ms
}

# label, unit, the word before "/s" in the epoch line (tokens, samples), then the words of a training
# command (subcommand and options; a checkpoint in $tmp is added): the median rate of `runs` runs of
# each side, read off its "epoch 1" line
training_row() {
  local label=$1 unit=$2 rate=$3 words=$4 side r line
  for side in "${sides[@]}"; do : > "$tmp/values_$side"; done
  for ((r = 0; r < runs; r++)); do
    for side in "${sides[@]}"; do
      # shellcheck disable=SC2086 # the command and its options are words
      line=$(${cmd[$side]} $words ${opts[$side]:-} --checkpoint "$tmp/row.safetensors" 2>/dev/null |
             grep -E '^epoch 1' | tail -1)
      rm -f "$tmp"/row.safetensors*
      printf '{"row":"%s","who":"%s","line":"%s"}\n' "$label" "$side" "$line" >> "$out"
      sed -nE "s/.* ([0-9.]+) $rate\\/s.*/\\1/p" <<<"$line" >> "$tmp/values_$side"
    done
  done
  for side in "${sides[@]}"; do value[$label,$side]=$(median < "$tmp/values_$side"); done
  table_line "$label" "$unit"
}

translator_row() { # threads: the median tokens/s of `runs` runs of `steps` steps
  training_row "translator train, $1 thread(s)" tok/s tokens \
    "translate train --max-steps $steps --threads $1 --epochs 1 --beam 1 --eval-limit 1"
}
