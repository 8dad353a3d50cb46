# shellcheck shell=bash
# One helper for the benchmark scripts (sourced): their results files are JSON lines, one record
# per line, which bench/make_results.py reads back.
#   record_rows TAG FILE < rows: each non-empty line of stdin (one JSON object: `attn bench --json`
#   prints one per row, `attn bench peak` one per kernel level) as {"tag": TAG, "result": <line>}
record_rows() {
  local tag=$1 file=$2 line
  while IFS= read -r line; do
    [[ -n $line ]] && printf '{"tag":"%s","result":%s}\n' "$tag" "$line" >>"$file"
  done
  return 0
}
