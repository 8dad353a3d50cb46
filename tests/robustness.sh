#!/usr/bin/env bash
# The bad-input matrix: hostile files, options and conditions against the attn program, one row
# each, printed as a table "input -> outcome". A row passes when
#   - the exit status is the expected one (2 usage, 1 data; 0 for inputs that are valid though
#     odd, such as a 1 MB review) and below 128 (no crash, no signal),
#   - the message names the file or option and what was expected (a pattern per row),
#   - no sanitizer report appears (run it on the ASan + UBSan build: build-asan/attn),
#   - no partial output file is left behind (the output path is absent, or still the old file,
#     and no *.tmp* file remains).
# Usage: tests/robustness.sh [--doc] [ATTN_BIN]   (default: build-asan/attn, else build/attn)
# docs/robustness.md's table of the rows (file, input, exit, what the message must say) is made
# here: --doc writes it; without, a last row fails when the document's table is not this run's.
# Ends with "robustness: N passed, N failed"; exits 1 when a row failed.
set -u
cd "$(dirname "$0")/.." || exit 1
root=$PWD
write_doc=false
[[ ${1:-} == --doc ]] && { write_doc=true; shift; }
bin=${1:-}
if [[ -z $bin ]]; then
  if [[ -x build-asan/attn ]]; then bin=build-asan/attn; else bin=build/attn; fi
fi
[[ $bin == /* ]] || bin=$root/$bin
[[ -x $bin ]] || { echo "robustness: no program at $bin (build first)"; echo "robustness: 0 passed, 1 failed"; exit 1; }
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
# a request beyond memory returns NULL, as libc's malloc does (ASan would abort instead)
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
source tests/robustness/lib.sh

work=$(mktemp -d /tmp/attn-robustness.XXXXXX)
full_mount=""
cleanup() {
  [[ -n $full_mount ]] && umount "$full_mount" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
in=$work/in    # hostile inputs
out=$work/out  # every output goes here: checked for leftovers after each row
mkdir -p "$in" "$out"

passed=0
failed=0
rows=()
doc_rows=() # docs/robustness.md's table, one line per row
note=""   # extra text for the table, set by a row's command

# row NAME WANT_EXIT PATTERN [ABSENT_PATH...] -- COMMAND...
# PATTERN is an extended regex the program's stderr must match (empty: none required).
row() {
  local name=$1 want=$2 pattern=$3
  shift 3
  local said=${pattern//$work\//} group=${BASH_SOURCE[1]#tests/}
  local shown=${name//|/\\|}
  local lt='&lt;' gt='&gt;' # quoted: bash 5.2 reads a bare & in a replacement as the match
  said=${said//|/\\|} shown=${shown//</"$lt"} shown=${shown//>/"$gt"}
  doc_rows+=("| ${group%.sh} | $shown | $want | ${said:+\`$said\`} |")
  local absent=()
  while [[ $1 != -- ]]; do absent+=("$1"); shift; done
  shift
  note=""
  "$@" >"$work/stdout" 2>"$work/stderr"
  local rc=$?
  local why=""
  ((rc >= 128)) && why+="crashed (exit $rc); "
  [[ $rc != "$want" ]] && why+="exit $rc, expected $want; "
  if grep -qE "AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer" "$work/stderr"; then
    why+="sanitizer report; "
  fi
  if [[ -n $pattern ]] && ! grep -qE -- "$pattern" "$work/stderr"; then
    why+="message does not match /$pattern/; "
  fi
  local p
  for p in "${absent[@]}"; do [[ -e $p ]] && why+="left $(basename "$p") behind; "; done
  local tmp
  tmp=$(find "$out" "$in" -name '*.tmp*' 2>/dev/null | head -1)
  [[ -n $tmp ]] && why+="left $(basename "$tmp") behind; "
  [[ -n $note && $note == FAIL* ]] && why+="${note#FAIL: }; "
  local msg
  msg=$(grep -vE "step [0-9]+/[0-9]+, loss" "$work/stderr" | grep -m1 -E "^attn|error|Error")
  msg=${msg//$work\//}
  msg=${msg:0:150}
  [[ -z $msg ]] && msg=$(head -c 150 "$work/stderr" | head -1)
  [[ -z $msg ]] && msg="(no message)"
  [[ -n $note && $note != FAIL* ]] && msg+=" [$note]"
  if [[ -z $why ]]; then
    passed=$((passed + 1))
    rows+=("$(printf '| %-52s | %4s | %4s | OK   | %s' "$name" "$want" "$rc" "$msg")")
  else
    failed=$((failed + 1))
    rows+=("$(printf '| %-52s | %4s | %4s | FAIL | %s -- %s' "$name" "$want" "$rc" "${why%; }" "$msg")")
    echo "---- $name: stderr" >&2
    head -20 "$work/stderr" >&2
  fi
  rm -f "$out"/*.tmp* 2>/dev/null
}

# ---- inputs ---------------------------------------------------------------------------------

# A valid sdpa input: q, k, v (1, 1, 2, 2) F32.
qkv_header='{"q":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[0,16]},"k":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[16,32]},"v":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[32,48]}}'
ones12=$(f32 1 0 0 1 1 1 0 0 0.5 0.5 -1 2)
st_file "$in/good.safetensors" "$qkv_header" "$ones12"
good_size=$(stat -c %s "$in/good.safetensors")
head -c $((good_size - 10)) "$in/good.safetensors" > "$in/truncated.safetensors"
: > "$in/empty.safetensors"
{ printf "$(le64 1000)"; printf '{"q":{}}'; } > "$in/header_beyond.safetensors"
{ printf '\xff\xff\xff\xff\xff\xff\xff\xff'; printf '{}'; } > "$in/header_huge.safetensors"
st_file "$in/not_json.safetensors" '{"q": {"dtype": "F32", "shape": [1, 1, 2, 2], "data_offsets": [0, 16]' "$(f32 1 0 0 1)"
st_file "$in/binary_header.safetensors" $'\x01\x02\x03garbage' ""
st_file "$in/overlap.safetensors" '{"q":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[0,16]},"k":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[8,24]},"v":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[24,40]}}' "$(f32 1 0 0 1 1 1 0 0 0.5 0.5)"
st_file "$in/outside.safetensors" '{"q":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[0,16]},"k":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[16,32]},"v":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[32,48]}}' "$(f32 1 0 0 1 1 1 0 0)"
st_file "$in/hole.safetensors" '{"q":{"dtype":"F32","shape":[1,1,1,1],"data_offsets":[4,8]}}' "$(f32 1 1)"
st_file "$in/dtype.safetensors" '{"q":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}}' '\x00\x01\x02\x03'
st_file "$in/overflow.safetensors" '{"q":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,16]}}' "$(f32 1 0 0 1)"
st_file "$in/negative_dim.safetensors" '{"q":{"dtype":"F32","shape":[-1,4],"data_offsets":[0,16]}}' "$(f32 1 0 0 1)"
st_file "$in/missing_v.safetensors" '{"q":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[0,16]},"k":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[16,32]}}' "$(f32 1 0 0 1 1 1 0 0)"
st_file "$in/wrong_shape.safetensors" '{"q":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[0,16]},"k":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[16,40]},"v":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[40,56]}}' "$(f32 1 0 0 1 1 1 0 0 1 1 0 0 0.5 0.5)"
st_file "$in/five_dims.safetensors" '{"q":{"dtype":"F32","shape":[1,1,1,2,2],"data_offsets":[0,16]},"k":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[16,32]},"v":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[32,48]}}' "$ones12"
st_file "$in/dup_name.safetensors" '{"q":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"q":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}' "$(f32 1 1)"
# mha (L, B, E) = (2, 1, 2), one head; in_proj_weight must be (6, 2)
mha_header() { # in_proj_weight shape, its float count
  printf '{"q":{"dtype":"F32","shape":[2,1,2],"data_offsets":[0,16]},"k":{"dtype":"F32","shape":[2,1,2],"data_offsets":[16,32]},"v":{"dtype":"F32","shape":[2,1,2],"data_offsets":[32,48]},"in_proj_weight":{"dtype":"F32","shape":%s,"data_offsets":[48,%d]},"out_proj.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[%d,%d]}}' \
    "$1" $((48 + 4 * $2)) $((48 + 4 * $2)) $((64 + 4 * $2))
}
st_file "$in/mha_param_shape.safetensors" "$(mha_header '[3,2]' 6)" "$ones12$(f32 1 0 0 1 1 0)$(f32 1 0 0 1)"
st_file "$in/mha_param_nan.safetensors" "$(mha_header '[6,2]' 12)" "$ones12$(f32 1 0 0 1 1 0 0 1 nan 0 0 1)$(f32 1 0 0 1)"
# batched (L, B, E) inputs with an unbatched (S) key_padding_mask
kpm_header=$(mha_header '[6,2]' 12)
st_file "$in/mha_kpm_1d.safetensors" "${kpm_header%\}},\"key_padding_mask\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[112,114]}}" \
  "$ones12$(f32 1 0 0 1 1 0 0 1 1 0 0 1)$(f32 1 0 0 1)\x00\x01"
seed_header='{"q":{"dtype":"F32","shape":[2,1,2],"data_offsets":[0,16]},"k":{"dtype":"F32","shape":[2,1,2],"data_offsets":[16,32]},"v":{"dtype":"F32","shape":[2,1,2],"data_offsets":[32,48]},"Wq.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[48,56]},"Wk.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[56,72]},"Wv.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[72,88]},"fc_out.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[88,104]}}'
st_file "$in/mha_seed_shape.safetensors" "$seed_header" "$ones12$(f32 1 0)$(f32 1 0 0 1)$(f32 1 0 0 1)$(f32 1 0 0 1)"
st_file "$in/nan_q.safetensors" "$qkv_header" "$(f32 1 0 nan 1 1 1 0 0 0.5 0.5 -1 2)"
st_file "$in/inf_k.safetensors" "$qkv_header" "$(f32 1 0 0 1 1 inf 0 0 0.5 0.5 -1 2)"
st_file "$in/nan_mask.safetensors" "${qkv_header%\}},\"attn_mask\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[48,64]}}" "$ones12$(f32 0 nan 0 0)"
st_file "$in/nan_grad_out.safetensors" "${qkv_header%\}},\"grad_out\":{\"dtype\":\"F32\",\"shape\":[1,1,2,2],\"data_offsets\":[48,64]}}" "$ones12$(f32 1 nan 1 1)"
nw_header='{"x_train":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"y_train":{"dtype":"F32","shape":[4],"data_offsets":[16,32]},"x_test":{"dtype":"F32","shape":[2],"data_offsets":[32,40]},"y_true":{"dtype":"F32","shape":[2],"data_offsets":[40,48]}}'
st_file "$in/nw_inf.safetensors" "$nw_header" "$(f32 0 0.5 1 inf 0 1 2 1 0 1 0 1)"
st_file "$in/nw_short.safetensors" '{"x_train":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y_train":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},"x_test":{"dtype":"F32","shape":[2],"data_offsets":[16,24]},"y_true":{"dtype":"F32","shape":[2],"data_offsets":[24,32]}}' "$(f32 0 1 0 1 0 1 0 1)"
st_file "$in/heat_nan.safetensors" '{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}' "$(f32 0.5 nan 1 0)"
st_file "$in/heat3.safetensors" '{"w":{"dtype":"F32","shape":[2,2,2],"data_offsets":[0,32]}}' "$(f32 0 1 2 0.5 1 0 -1 2)"

# aclImdb folders
make_imdb "$in/imdb" 10 5
mkdir -p "$in/imdb_empty"
mkdir -p "$in/imdb_noreviews/train/neg" "$in/imdb_noreviews/train/pos" "$in/imdb_noreviews/test/neg" "$in/imdb_noreviews/test/pos"
echo "not a review name" > "$in/imdb_noreviews/train/neg/README"
cp -r "$in/imdb" "$in/imdb_latin1"
printf 'a caf\xe9 review in Latin-1, not UTF-8\n' > "$in/imdb_latin1/train/pos/3_8.txt"
cp -r "$in/imdb" "$in/imdb_big"
{ for ((i = 0; i < 4096; i++)); do printf 'this wonderful film is a brilliant and moving story of friendship, love, courage; the actors are superb. %0140d\n' 0; done; } > "$in/imdb_big/train/pos/0_10.txt"
big_size=$(stat -c %s "$in/imdb_big/train/pos/0_10.txt")

# parallel text
make_pairs "$in/pairs" 12
mkdir -p "$in/pairs_misaligned"
cp "$in"/pairs/*.gz "$in/pairs_misaligned/"
{ gzip -dc "$in/pairs/train.fr.gz"; echo "Une ligne de trop ."; } | gzip -n > "$in/pairs_misaligned/train.fr.gz"
mkdir -p "$in/pairs_latin1"
cp "$in"/pairs/*.gz "$in/pairs_latin1/"
printf 'Un caf\xe9 .\n' | gzip -n > "$in/pairs_latin1/val.fr.gz"
printf 'One line .\n' | gzip -n > "$in/pairs_latin1/val.en.gz"
mkdir -p "$in/pairs_badgz"
cp "$in"/pairs/*.gz "$in/pairs_badgz/"
head -c 20 "$in/pairs/train.en.gz" > "$in/pairs_badgz/train.en.gz"

echo "not a directory" > "$in/a_file"
mkfifo "$in/fifo.safetensors"
cp -r "$in/imdb" "$in/imdb_dir"
cp -r "$in/imdb" "$in/imdb_few_neg"
for f in $(ls -d "$in"/imdb_few_neg/train/neg/* | head -5); do rm -f "$f"; done
mkdir "$in/imdb_dir/train/pos/9_9.txt"

# tiny training options shared by the classify rows
tiny=(--epochs 2 --batch-size 4 --max-len 32 --embed-dim 16 --heads 2 --hidden 16 --threads 1)

# ---- rows -----------------------------------------------------------------------------------

o=$out/o.safetensors
op() { "$bin" op sdpa --in "$1" --out "$o" "${@:2}"; }
row "safetensors: truncated"                      1 "truncated.safetensors: .*(past the end|data bytes)" "$o" -- op "$in/truncated.safetensors"
row "safetensors: empty file (0 bytes)"           1 "empty.safetensors: 0 bytes is too short" "$o" -- op "$in/empty.safetensors"
row "safetensors: header length beyond the file" 1 "header_beyond.safetensors: header size 1000 runs past the end" "$o" -- op "$in/header_beyond.safetensors"
row "safetensors: header length 2^64-1"          1 "header_huge.safetensors: header size [0-9]+ is over the limit" "$o" -- op "$in/header_huge.safetensors"
row "safetensors: header not JSON"                1 "not_json.safetensors: the header is not valid JSON" "$o" -- op "$in/not_json.safetensors"
row "safetensors: binary header"                  1 "binary_header.safetensors: the header must be a JSON object" "$o" -- op "$in/binary_header.safetensors"
row "safetensors: offsets overlapping"            1 "overlap.safetensors: tensor \"k\": data_offsets \[8, 24\] overlap tensor \"q\"" "$o" -- op "$in/overlap.safetensors"
row "safetensors: offsets outside the buffer"     1 "outside.safetensors: tensor \"v\": data_offsets \[32, 48\] run past the end" "$o" -- op "$in/outside.safetensors"
row "safetensors: hole before the first tensor"  1 "hole.safetensors: tensor \"q\": .*leave a hole" "$o" -- op "$in/hole.safetensors"
row "safetensors: unknown dtype F8_E4M3"          1 "dtype.safetensors: tensor \"q\": dtype \"F8_E4M3\" is not one of" "$o" -- op "$in/dtype.safetensors"
row "safetensors: shape product overflows"        1 "overflow.safetensors: tensor \"q\": shape \(4294967296, 4294967296, 4\) has more elements than int64" "$o" -- op "$in/overflow.safetensors"
row "safetensors: negative dimension"             1 "negative_dim.safetensors: tensor \"q\": shape entry 0 must be a non-negative integer" "$o" -- op "$in/negative_dim.safetensors"
row "safetensors: duplicate tensor name"          1 "dup_name.safetensors: .*\"q\"" "$o" -- op "$in/dup_name.safetensors"
row "safetensors: a directory"                    2 "--in .*in: is a folder; expected a file" "$o" -- op "$in"
row "safetensors: a FIFO (must not block)"        2 "--in .*fifo.safetensors: is not a regular file" "$o" -- timeout 20 "$bin" op sdpa --in "$in/fifo.safetensors" --out "$o"
row "safetensors: /dev/zero"                      2 "--in /dev/zero: is not a regular file" "$o" -- op /dev/zero
row "safetensors: missing file"                   2 "--in .*nowhere.safetensors: No such file" "$o" -- op "$in/nowhere.safetensors"
row "attn op sdpa: tensor v missing"              1 "missing_v.safetensors: no tensor named \"v\"" "$o" -- op "$in/missing_v.safetensors"
row "attn op sdpa: k of the wrong shape"          1 "sdpa: q \(1, 1, 2, 2\), k \(1, 1, 2, 3\), v \(1, 1, 2, 2\) do not fit" "$o" -- op "$in/wrong_shape.safetensors"
row "attn op sdpa: q with 5 dims"                 1 "five_dims.safetensors: tensor \"q\" has 5 dimensions; attn tensors have at most 4" "$o" -- op "$in/five_dims.safetensors"
row "attn op mha: in_proj_weight (3, 2)"          1 "wrong shape 1: \"in_proj_weight\" \(3, 2\) in the file, \(6, 2\) in the module" "$o" -- "$bin" op mha --num-heads 1 --in "$in/mha_param_shape.safetensors" --out "$o"
row "attn op mha: seed name Wq.weight (1, 2)"     1 "Wq.weight has shape \(1, 2\), expected \(2, 2\)" "$o" -- "$bin" op mha --num-heads 1 --in "$in/mha_seed_shape.safetensors" --out "$o"
row "attn op mha: --num-heads missing"            2 "mha needs --num-heads" "$o" -- "$bin" op mha --in "$in/mha_param_shape.safetensors" --out "$o"
row "attn op mha: (S) key padding, batched q"     1 "key_padding_mask \(2\) is for unbatched \(L,E\) inputs" "$o" -- "$bin" op mha --num-heads 1 --in "$in/mha_kpm_1d.safetensors" --out "$o"
row "attn op: NaN in q"                           1 "tensor \"q\" has NaN at index \(0, 0, 1, 0\); expected finite values" "$o" -- op "$in/nan_q.safetensors"
row "attn op: +Inf in k"                          1 "tensor \"k\" has \+Inf at index \(0, 0, 0, 1\); expected finite values" "$o" -- op "$in/inf_k.safetensors"
row "attn op: NaN in a parameter"                 1 "tensor \"in_proj_weight\" has NaN at index \(4, 0\)" "$o" -- "$bin" op mha --num-heads 1 --in "$in/mha_param_nan.safetensors" --out "$o"
row "attn op: NaN in an additive attn_mask"       1 "additive mask element 1 is nan; expected a finite value or -inf" "$o" -- op "$in/nan_mask.safetensors"
row "attn op: NaN in grad_out"                    1 "tensor \"grad_out\" has NaN at index \(0, 0, 0, 1\)" "$o" -- op "$in/nan_grad_out.safetensors"
row "attn op: unknown mechanism"                  2 "unknown mechanism \"sdpb\"; expected sdpa" "$o" -- "$bin" op sdpb --in "$in/good.safetensors" --out "$o"
row "attn op: unknown option --bogus"             2 "unknown option \"--bogus\"" "$o" -- op "$in/good.safetensors" --bogus
row "attn op: --scale not a number"               2 "--scale expects a finite number, got \"abc\"" "$o" -- op "$in/good.safetensors" --scale abc
row "attn op: --scale nan"                        2 "--scale expects a finite number, got \"nan\"" "$o" -- op "$in/good.safetensors" --scale nan
row "attn op: --threads 0 (out of range)"         2 "--threads must be in \[1, 1024\], got 0" "$o" -- op "$in/good.safetensors" --threads 0
row "attn op: --num-heads 1e99"                   2 "--num-heads expects an integer, got \"1e99\"" "$o" -- op "$in/good.safetensors" --num-heads 1e99
row "attn op: --impl value unknown"               2 "--impl expects auto, fused or ref, got \"best\"" "$o" -- op "$in/good.safetensors" --impl best
row "attn op: --out in a missing folder"          2 "--out .*nowhere/o.safetensors: cannot write: folder .*nowhere: No such file" "$out/nowhere" -- "$bin" op sdpa --in "$in/good.safetensors" --out "$out/nowhere/o.safetensors"
row "attn op: --out under a regular file"         2 "--out .*a_file/o.safetensors: cannot write.*Not a directory" -- "$bin" op sdpa --in "$in/good.safetensors" --out "$in/a_file/o.safetensors"
row "attn op: --in missing its value"             2 "option --in needs a value" "$o" -- "$bin" op sdpa --out "$o" --in
row "attn: unknown command"                       2 "unknown command \"frobnicate\"" -- "$bin" frobnicate

ck=$out/ck.safetensors
cls() { "$bin" classify train "${tiny[@]}" --checkpoint "$ck" "$@"; }
row "classify: missing data folder"               2 "--data .*nowhere: No such file or directory" "$ck" "$ck.vocab" -- cls --data "$in/nowhere"
row "classify: data folder is a file"             2 "--data .*a_file: is not a folder" "$ck" "$ck.vocab" -- cls --data "$in/a_file"
row "classify: empty data folder"                 1 "imdb_empty/train/neg: cannot open the folder .*expected an aclImdb folder" "$ck" "$ck.vocab" -- cls --data "$in/imdb_empty"
row "classify: folders without reviews"           1 "imdb_noreviews/train/neg: no reviews; expected files named <id>_<rating>.txt" "$ck" "$ck.vocab" -- cls --data "$in/imdb_noreviews"
row "classify: a review that is not UTF-8"        1 "imdb_latin1/train/pos/3_8.txt: invalid UTF-8 at byte offset 5 \\(byte 0xE9" "$ck" "$ck.vocab" -- cls --data "$in/imdb_latin1"
review_folder() {
  cls --data "$in/imdb_dir" --epochs 1 || return
  note="skipped, reported, trained"
  rm -f "$ck" "$ck.vocab"
}
row "classify: a review that is a folder (skipped)" 0 "skipped 1 entry named like a review that is not a regular file \(e.g. .*9_9.txt \(a folder\)\)" -- review_folder
big_review() {
  cls --data "$in/imdb_big" --epochs 1 || return
  note="review of $big_size bytes, cut to --max-len 32; checkpoint written"
  [[ -s $ck ]] || note="FAIL: no checkpoint"
  rm -f "$ck" "$ck.vocab"
}
row "classify: a review of 1 MB (valid: accepted)" 0 "" -- big_review
row "classify: --recipe unknown"                 2 "--recipe expects seed or best, got \"fancy\"" "$ck" -- cls --data "$in/imdb" --recipe fancy
row "classify: --ngrams -1"                       2 "--ngrams must be in \[0, 67108864\], got -1" "$ck" -- cls --data "$in/imdb" --ngrams -1
row "classify eval: --recipe (train only)"        2 "--recipe applies to train only, not to eval" "$ck" -- "$bin" classify eval --data "$in/imdb" --checkpoint "$ck" --recipe best
row "classify: --validate, 5 reviews of a label"  1 "--validate holds out a tenth of each label's training reviews, and needs 10 of each; train has 5 neg and 10 pos" "$ck" "$ck.vocab" -- cls --data "$in/imdb_few_neg" --validate
recipe_bag() {
  # the recipe, its bag overridden smaller, on the held-out tenth; eval reads the bag's size back
  cls --data "$in/imdb" --epochs 1 --recipe best --ngrams 64 --validate | grep -q "validation accuracy: .* (2 reviews)" ||
    { note="FAIL: no validation accuracy on 2 reviews"; return 0; }
  "$bin" classify eval --data "$in/imdb" --checkpoint "$ck" | grep -q "test accuracy" || { note="FAIL: eval"; return 0; }
  note="trained with the bag (64 buckets), scored 2 held-out reviews, eval read it back"
  rm -f "$ck" "$ck.vocab"
}
row "classify: --recipe best --validate --ngrams 64" 0 "" -- recipe_bag
row "classify: unknown option --epoch"            2 "unknown option \"--epoch\" \(see attn classify --help\)" "$ck" -- cls --data "$in/imdb" --epoch 3
row "classify: --epochs not a number"             2 "--epochs expects an integer, got \"three\"" "$ck" -- cls --data "$in/imdb" --epochs three
row "classify: --epochs 0 (out of range)"         2 "--epochs must be in \[1, 100000\], got 0" "$ck" -- cls --data "$in/imdb" --epochs 0
row "classify: --lr 1e9 (out of range)"           2 "--lr must be in \[1e-12, 10\], got 1e\+09" "$ck" -- cls --data "$in/imdb" --lr 1e9
row "classify: --lr inf"                          2 "--lr expects a finite number, got \"inf\"" "$ck" -- cls --data "$in/imdb" --lr inf
row "classify: --batch-size -4"                   2 "--batch-size must be in \[1, 65536\], got -4" "$ck" -- cls --data "$in/imdb" --batch-size -4
row "classify: --max-len 99999999999999999999"    2 "--max-len expects an integer, got \"99999999999999999999\"" "$ck" -- cls --data "$in/imdb" --max-len 99999999999999999999
row "classify: --dropout 1.5"                     2 "--dropout must be in \[0, 0.99\], got 1.5" "$ck" -- cls --data "$in/imdb" --dropout 1.5
row "classify: --attention unknown"               2 "--attention expects softmax, linear, conv or additive, got \"sparse\"" "$ck" -- cls --data "$in/imdb" --attention sparse
row "classify: batch 65536 x max-len 100000 (52 GB)" 1 "out of memory for a batch of 65536 x 100000 token ids; lower --batch-size or --max-len" "$ck" -- cls --data "$in/imdb" --batch-size 65536 --max-len 100000
row "classify: --checkpoint in a missing folder"  2 "--checkpoint .*nowhere/ck.safetensors: cannot write: folder .*nowhere: No such file" "$out/nowhere" -- "$bin" classify train "${tiny[@]}" --data "$in/imdb" --checkpoint "$out/nowhere/ck.safetensors"
row "classify eval: no checkpoint"                2 "--checkpoint .*ck.safetensors: No such file or directory \(train a model first" -- "$bin" classify eval --data "$in/imdb" --checkpoint "$ck"
# a checkpoint to break
"$bin" classify train "${tiny[@]}" --epochs 1 --data "$in/imdb" --checkpoint "$in/good_ck.safetensors" >/dev/null 2>&1
head -c 3000 "$in/good_ck.safetensors" > "$ck"
row "classify train --resume: truncated checkpoint" 1 "ck.safetensors: .*(past the end|too short|not valid JSON)" -- cls --data "$in/imdb" --resume
row "classify eval: truncated checkpoint"         1 "ck.safetensors: .*(past the end|too short|not valid JSON)" -- "$bin" classify eval --data "$in/imdb" --checkpoint "$ck"
row "classify --resume: another model's checkpoint" 2 "resume: .*ck.safetensors has embed_dim 16 in its metadata, these options give 24: resume with the options it was trained with" -- \
  bash -c 'cp "$1" "$2"; shift 2; "$@"' _ "$in/good_ck.safetensors" "$ck" "$bin" classify train "${tiny[@]}" --embed-dim 24 --data "$in/imdb" --checkpoint "$ck" --resume
row "translate eval: a classifier checkpoint"     1 "ck.safetensors is not a translation checkpoint" -- "$bin" translate eval --data "$in/pairs" --checkpoint "$ck"
cp "$in/good.safetensors" "$ck"
row "classify eval: not a classifier checkpoint"  1 "ck.safetensors is not a classifier checkpoint" -- "$bin" classify eval --data "$in/imdb" --checkpoint "$ck"
# a checkpoint of an older attn (no vocabulary inside) whose vocabulary file beside it is gone
st_rewrite "$in/good_ck.safetensors" "$ck" 's/,"vocab":"[^"]*"//'
row "classify eval: older checkpoint, vocabulary file missing" 1 "ck.safetensors.vocab: cannot open" -- "$bin" classify eval --data "$in/imdb" --checkpoint "$ck"
cp "$in/good_ck.safetensors" "$ck"
row "classify predict: text not UTF-8"            1 "text: invalid UTF-8 at byte offset 3" -- "$bin" classify predict --checkpoint "$ck" $'caf\xe9 au lait'
rm -f "$ck" "$ck.vocab"

# a full disk while writing a checkpoint: a 512 KiB tmpfs filled up to 16 KiB when we may mount
# one (ENOSPC), else a 16 KiB file-size limit with SIGXFSZ ignored (EFBIG)
full_disk() {
  local dir=$out/full mode
  mkdir -p "$dir"
  if mount -t tmpfs -o size=512k tmpfs "$dir" 2>/dev/null; then full_mount=$dir; mode=tmpfs; else mode=rlimit; fi
  local c=$dir/ck.safetensors
  "$bin" classify train "${tiny[@]}" --epochs 1 --data "$in/imdb" --checkpoint "$c" >/dev/null 2>&1 || { note="FAIL: first run failed"; return 0; }
  local before
  before=$(sha256sum < "$c")
  local rc
  if [[ $mode == tmpfs ]]; then
    local avail
    avail=$(df --output=avail -B1 "$dir" | tail -1)
    head -c $((avail - 16384)) /dev/zero > "$dir/filler" 2>/dev/null
    "$bin" classify train "${tiny[@]}" --epochs 3 --data "$in/imdb" --checkpoint "$c" --resume
    rc=$?
  else
    (trap '' XFSZ; ulimit -f 16; exec "$bin" classify train "${tiny[@]}" --epochs 3 --data "$in/imdb" --checkpoint "$c" --resume)
    rc=$?
  fi
  local after
  after=$(sha256sum < "$c")
  [[ $before == "$after" ]] || note="FAIL: the checkpoint changed"
  if [[ -z $note ]]; then
    "$bin" classify eval --data "$in/imdb" --checkpoint "$c" >/dev/null 2>&1 && note="$mode: the old checkpoint is intact and loads" || note="FAIL: the old checkpoint does not load"
  fi
  compgen -G "$dir/*.tmp*" >/dev/null && note="FAIL: a temporary file is left"
  if [[ -n $full_mount ]]; then umount "$full_mount" && full_mount=""; fi
  rm -rf "$dir"
  return $rc
}
row "classify: full disk while writing a checkpoint" 1 "full/ck.safetensors: cannot write \(via .*full/ck.safetensors.tmp.[0-9]+.[0-9a-f]+\): (No space left on device|File too large)" -- full_disk

# training that diverges: the parameters become NaN after the update of step 7 (epoch 2, step 2)
nan_training() { # extra options...
  ATTN_TEST_NAN_AFTER_STEP=7 "$bin" classify train "${tiny[@]}" --epochs 3 --data "$in/imdb" --checkpoint "$ck" "$@"
  local rc=$?
  local resumed
  resumed=$("$bin" classify train "${tiny[@]}" --epochs 1 --data "$in/imdb" --checkpoint "$ck" --resume 2>/dev/null | grep -o "resumed .*")
  "$bin" classify eval --data "$in/imdb" --checkpoint "$ck" >/dev/null 2>&1 || note="FAIL: the last good checkpoint does not load"
  [[ -z $note ]] && note="last good checkpoint loads: ${resumed#resumed *safetensors }"
  rm -f "$ck" "$ck.vocab"
  return $rc
}
nan_every_step() {
  nan_training --checkpoint-every 1
  local rc=$?
  [[ $note == *"at epoch 2, step 1" ]] || [[ $note == FAIL* ]] || note="FAIL: expected the checkpoint of epoch 2, step 1 ($note)"
  return $rc
}
nan_per_epoch() {
  nan_training
  local rc=$?
  [[ $note == *"at epoch 2, step 0" ]] || [[ $note == FAIL* ]] || note="FAIL: expected the checkpoint of the end of epoch 1 ($note)"
  return $rc
}
row "classify: parameters NaN after step 7, checkpoint every step" 1 "epoch 2, step 2: parameter \"embedding.weight\" holds NaN or Inf after the update .*ck.safetensors keeps the last good checkpoint" -- nan_every_step
row "classify: loss NaN at step 8, checkpoint per epoch" 1 "epoch 2, step 3: the loss is not finite; stopped, the last good checkpoint is .*ck.safetensors" -- nan_per_epoch

tr() { "$bin" translate train --d-model 16 --heads 2 --ffn 16 --layers 1 --epochs 1 --batch-size 4 --min-freq 1 --threads 1 --checkpoint "$ck" "$@"; }
row "translate: missing data folder"              2 "--data .*nowhere: No such file or directory" "$ck" -- tr --data "$in/nowhere"
row "translate: line counts differ"               1 "train.en.gz has 12 lines but .*train.fr.gz has 13; expected line-aligned files" "$ck" -- tr --data "$in/pairs_misaligned"
row "translate: a line that is not UTF-8"         1 "val.fr.gz: invalid UTF-8 at byte offset 6" "$ck" -- tr --data "$in/pairs_latin1"
row "translate: truncated gzip file"              1 "train.en.gz: the gzip stream ends early .*expected a complete plain or gzip file" "$ck" -- tr --data "$in/pairs_badgz"
row "translate: --model unknown"                  2 "--model expects transformer or bahdanau, got \"rnn\"" "$ck" -- tr --data "$in/pairs" --model rnn
row "translate: --beam 0"                         2 "--beam must be in \[1, 64\], got 0" "$ck" -- tr --data "$in/pairs" --beam 0
row "translate: --label-smoothing x"              2 "--label-smoothing expects a finite number, got \"x\"" "$ck" -- tr --data "$in/pairs" --label-smoothing x
row "translate: --length-penalty -1"               2 "--length-penalty must be in \[0, 10\], got -1" "$ck" -- tr --data "$in/pairs" --length-penalty -1
row "translate: --split that does not exist"      1 "pairs/nope.en.gz: cannot open \(No such file or directory\)" "$ck" -- tr --data "$in/pairs" --split nope
row "translate: --recipe unknown"                 2 "--recipe expects seed or best, got \"fancy\"" "$ck" -- tr --data "$in/pairs" --recipe fancy
row "translate: --recipe best with --model bahdanau" 2 "--recipe best is a recipe for the Transformer, not --model bahdanau" "$ck" -- tr --data "$in/pairs" --recipe best --model bahdanau
row "translate: --average-kept without --keep-epochs" 2 "--average-kept needs --keep-epochs K" "$ck" -- tr --data "$in/pairs" --average-kept
recipe_kept() {
  # the recipe, made tiny: train's closing BLEU of the kept epochs' mean = eval of those two files
  local said
  said=$(tr --data "$in/pairs" --recipe best --epochs 2 --keep-epochs 2 --average-kept --beam 2 2>/dev/null) &&
    grep -q "parameters: the mean of epochs 1 to 2" <<<"$said" &&
    [[ $(grep -e "^  -> " -e "BLEU" <<<"$said" | sed 's/, [0-9]* s$//') == \
      $("$bin" translate eval --data "$in/pairs" --beam 2 --checkpoint "$ck.epoch2" --average "$ck.epoch1" |
        grep -e "^  -> " -e "BLEU" | sed 's/, [0-9]* s$//') ]] && note="the same translations and BLEU"
  local rc=$?
  rm -f "$ck" "$ck.epoch1" "$ck.epoch2"
  return $rc
}
row "translate: --recipe best --average-kept, tiny" 0 "" -- recipe_kept

row "bench: unknown workload"                     2 "unknown workload \"gemv\"" -- "$bin" bench gemv
row "bench: --runs 0"                             2 "--runs must be in \[1, 1000\], got 0" -- "$bin" bench peak --runs 0

row "nw: Inf in --data x_train"                   1 "nw_inf.safetensors: tensor \"x_train\" has \+Inf at index \(3\); expected finite values" "$out/nw.safetensors" -- "$bin" nw --epochs 2 --plot none --data "$in/nw_inf.safetensors" --out "$out/nw.safetensors"
row "nw: --data with 2 training points"           1 "nw_short.safetensors: expected 1-D x_train and y_train of one length >= 3" "$out/nw.safetensors" -- "$bin" nw --epochs 2 --plot none --data "$in/nw_short.safetensors" --out "$out/nw.safetensors"
nw_big() { # a million training points: leave-one-out would need about 52 TB
  st_file "$in/nw_big.safetensors" '{"x_train":{"dtype":"F32","shape":[1000000],"data_offsets":[0,4000000]},"y_train":{"dtype":"F32","shape":[1000000],"data_offsets":[4000000,8000000]},"x_test":{"dtype":"F32","shape":[2],"data_offsets":[8000000,8000008]},"y_true":{"dtype":"F32","shape":[2],"data_offsets":[8000008,8000016]}}'
  head -c 8000016 /dev/zero >> "$in/nw_big.safetensors"
  "$bin" nw --epochs 2 --plot none --data "$in/nw_big.safetensors" --out "$out/nw.safetensors"
}
row "nw: --data of a million points (too big)"    1 "nw_big.safetensors: 1000000 training and 2 test points need about 52000.[0-9] GB of memory" "$out/nw.safetensors" -- nw_big
row "shapes: sizes in range that no memory holds" 2 "--batch 4096 --len 4096 --dk 1 need about 550.0 GB of memory" -- "$bin" shapes --batch 4096 --len 4096 --dk 1
row "bench: sizes in range that no memory holds"  2 "sdpa at --B 4096 --H 8 --L 65536 --d 64 need about" -- "$bin" bench sdpa --B 4096 --L 65536 --runs 1
row "nw: --lr -1 (out of range)"                  2 "--lr must be in \[0, 1e\+06\], got -1" "$out/nw.safetensors" -- "$bin" nw --lr -1 --plot none --out "$out/nw.safetensors"
row "nw: --out in a missing folder"               2 "--out .*nowhere/nw.safetensors: cannot write: folder" "$out/nowhere" -- "$bin" nw --epochs 2 --plot none --out "$out/nowhere/nw.safetensors"

row "plot: --out with extension .bmp"             2 "--out .*x.bmp: unknown picture format; expected a name ending in .png, .svg or .pdf" "$out/x.bmp" -- "$bin" plot heatmap --in "$in/heat_nan.safetensors" --tensor w --out "$out/x.bmp"
row "plot: --out in a missing folder"             2 "--out .*nowhere/x.png: cannot write: folder" "$out/nowhere" -- "$bin" plot heatmap --in "$in/heat_nan.safetensors" --tensor w --out "$out/nowhere/x.png"
row "plot: tensor missing"                        1 "heat_nan.safetensors: no tensor named \"weights\"" "$out/x.png" -- "$bin" plot heatmap --in "$in/heat_nan.safetensors" --tensor weights --out "$out/x.png"
row "plot: --grid with 3 --panel-titles for 2"    2 "3 --panel-titles for 2 panels" "$out/x.png" -- "$bin" plot heatmap --in "$in/heat3.safetensors" --tensor w --grid --panel-titles a,b,c --out "$out/x.png"
heat_nan() { "$bin" plot heatmap --in "$in/heat_nan.safetensors" --tensor w --out "$out/x.png" && [[ -s $out/x.png ]] && note="NaN cell drawn grey"; rm -f "$out/x.png"; }
row "plot: NaN in the matrix (valid: grey cell)"  0 "" -- heat_nan

# the edges of trust: masks, conventions, strict checkpoints, output files, loaders, buffering
source tests/robustness/trust.sh
# issue 26: nothing of the user's is ever lost (one group of rows per class)
source tests/robustness/keep.sh
# issue 37: the fourth hostile round, a row or more per cause
source tests/robustness/edges.sh
row "tour: --out-dir is a file"                   2 "--out-dir .*heat_nan.safetensors: it is not a folder" -- "$bin" tour 002/2.2 --out-dir "$in/heat_nan.safetensors"
tour_save_new() { # a missing --save folder is made (issue 28), and holds the step's tensors
  "$bin" tour 002/2.2 --out-dir "$out" --save "$out/nowhere" >/dev/null || return
  compgen -G "$out/nowhere/002_*.safetensors" >/dev/null && note="made; it holds the step's tensors" ||
    note="FAIL: $(ls "$out/nowhere" 2>&1)"
  rm -rf "$out/nowhere" "$out"/002_*
}
row "tour: --save in a missing folder (made)"     0 "" -- tour_save_new
row "tour: --save under a regular file"           2 "--save .*a_file/sub" -- "$bin" tour 002/2.2 --out-dir "$out" --save "$in/a_file/sub"
row "tour: unknown step"                          2 "unknown step \"002/9.9\" \(attn tour --list shows them\)" -- "$bin" tour 002/9.9 --out-dir "$out"
row "tour: --data that is not a folder"           2 "--data .*nowhere: No such file or directory" -- "$bin" tour 002/6.1 --out-dir "$out" --data "$in/nowhere"

# ---- docs/robustness.md's table: written with --doc, else held to this run's rows ----------
doc=docs/robustness.md begin='<!-- the rows: made by `bash tests/robustness.sh --doc`; do not edit -->' end='<!-- end of the rows -->'
doc_table() {
  echo "$begin"
  echo
  echo "| file | input | exit | the message must match |"
  echo "|---|---|---|---|"
  printf '%s\n' "${doc_rows[@]}"
  echo
  echo "$end"
}
doc_now=$(awk -v b="$begin" -v e="$end" '$0 == b {on = 1} on {print} $0 == e {on = 0}' "$doc")
if $write_doc; then
  { awk -v b="$begin" '$0 == b {exit} {print}' "$doc"; doc_table; awk -v e="$end" 'on {print} $0 == e {on = 1}' "$doc"; } >"$work/doc"
  cat "$work/doc" >"$doc"
  echo "robustness: wrote the table of ${#doc_rows[@]} rows into $doc"
elif [[ $doc_now == "$(doc_table)" ]]; then
  passed=$((passed + 1))
  rows+=("$(printf '| %-52s | %4s | %4s | OK   | %s' "docs/robustness.md lists these rows" 0 0 "${#doc_rows[@]} rows")")
else
  failed=$((failed + 1))
  rows+=("$(printf '| %-52s | %4s | %4s | FAIL | %s' "docs/robustness.md lists these rows" 0 1 \
    "its table is not this run's rows: bash tests/robustness.sh --doc")")
  diff <(echo "$doc_now") <(doc_table) | head -20 >&2
fi

# ---- the table ------------------------------------------------------------------------------
printf '| %-52s | %4s | %4s | %-4s | %s\n' "input" "want" "exit" "ok" "message (first line)"
printf '|%s|%s|%s|%s|%s\n' "$(printf -- '-%.0s' {1..54})" "------" "------" "------" "------"
printf '%s\n' "${rows[@]}"
echo "(program: ${bin#$root/})"
echo "robustness: $passed passed, $failed failed"
((failed == 0))
