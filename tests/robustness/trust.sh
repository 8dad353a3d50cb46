# shellcheck shell=bash
# Rows of tests/robustness.sh (sourced; uses its row, $bin, $in, $out, $tiny, $ck, note) for the
# edges of trust: masks and lengths whose shapes or dtypes do not fit, mask conventions of the
# PyTorch API each mechanism mirrors, checkpoints that are incomplete, non-finite or whose metadata
# is out of range, output paths that are devices, FIFOs, symlinks or too long, loaders meeting
# non-regular files, options checked before any work, and line-buffered output.

o=$out/o.safetensors
# ---- attn op inputs: sdpa (B=2, H=1, L=2, D=2) and mha (B=2, L=2, E=2, batch first) ----------
v8=$(f32 1 0 0 1 1 1 0 0.5)
qkv4='"q":{"dtype":"F32","shape":[2,1,2,2],"data_offsets":[0,32]},"k":{"dtype":"F32","shape":[2,1,2,2],"data_offsets":[32,64]},"v":{"dtype":"F32","shape":[2,1,2,2],"data_offsets":[64,96]}'
mha3='"q":{"dtype":"F32","shape":[2,2,2],"data_offsets":[0,32]},"k":{"dtype":"F32","shape":[2,2,2],"data_offsets":[32,64]},"v":{"dtype":"F32","shape":[2,2,2],"data_offsets":[64,96]},"in_proj_weight":{"dtype":"F32","shape":[6,2],"data_offsets":[96,144]},"out_proj.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[144,160]}'
mha_data="$v8$v8$v8$(f32 1 0 0 1 1 0 0 1 0.5 0.5 1 -1)$(f32 1 0 0 1)"
sdpa_with() { st_file "$in/$1.safetensors" "{$qkv4,$2}" "$v8$v8$v8$3"; } # NAME EXTRA_HEADER EXTRA_DATA (from 96)
mha_with() { st_file "$in/$1.safetensors" "{$mha3,$2}" "$mha_data$3"; }  # extra data from 160
lens() { local x s=""; for x in "$@"; do s+=$(le64 "$x"); done; printf '%s' "$s"; }
sdpa_with lens_short '"valid_lens":{"dtype":"I64","shape":[1],"data_offsets":[96,104]}' "$(lens 1)"
sdpa_with lens_long '"valid_lens":{"dtype":"I64","shape":[3],"data_offsets":[96,120]}' "$(lens 1 2 1)"
sdpa_with lens_query '"valid_lens":{"dtype":"I64","shape":[2,3],"data_offsets":[96,144]}' "$(lens 1 1 1 2 2 2)"
sdpa_with lens_3d '"valid_lens":{"dtype":"I64","shape":[2,1,1],"data_offsets":[96,112]}' "$(lens 1 2)"
sdpa_with lens_negative '"valid_lens":{"dtype":"I64","shape":[2],"data_offsets":[96,112]}' "$(lens 1 -1)"
sdpa_with lens_float '"valid_lens":{"dtype":"F32","shape":[2],"data_offsets":[96,104]}' "$(f32 1 2)"
sdpa_with kpm_long '"key_padding_mask":{"dtype":"BOOL","shape":[2,3],"data_offsets":[96,102]}' '\x00\x00\x01\x00\x00\x01'
sdpa_with kpm_batch '"key_padding_mask":{"dtype":"BOOL","shape":[3,2],"data_offsets":[96,102]}' '\x00\x01\x00\x00\x00\x01'
sdpa_with kpm_1d '"key_padding_mask":{"dtype":"BOOL","shape":[4],"data_offsets":[96,100]}' '\x00\x01\x00\x00'
sdpa_with kpm_float '"key_padding_mask":{"dtype":"F32","shape":[2,2],"data_offsets":[96,112]}' "$(f32 0 -inf 0 0)"
sdpa_with mask_i64 '"attn_mask":{"dtype":"I64","shape":[2,2],"data_offsets":[96,128]}' "$(lens 1 0 1 1)"
sdpa_with mask_u8 '"attn_mask":{"dtype":"U8","shape":[2,2],"data_offsets":[96,100]}' '\x01\x00\x01\x01'
sdpa_with mask_shape '"attn_mask":{"dtype":"BOOL","shape":[3,2],"data_offsets":[96,102]}' '\x01\x00\x01\x01\x01\x01'
sdpa_with mask_5d '"attn_mask":{"dtype":"BOOL","shape":[1,1,1,2,2],"data_offsets":[96,100]}' '\x01\x00\x01\x01'
sdpa_with grad_reshaped '"grad_out":{"dtype":"F32","shape":[2,2,1,2],"data_offsets":[96,128]}' "$v8"
mha_with mha_mask_i64 '"attn_mask":{"dtype":"I64","shape":[2,2],"data_offsets":[160,192]}' "$(lens 0 1 0 0)"
mha_with mha_mask_u8 '"attn_mask":{"dtype":"U8","shape":[2,2],"data_offsets":[160,164]}' '\x00\x01\x00\x00'
mha_with mha_mask3d '"attn_mask":{"dtype":"BOOL","shape":[3,2,2],"data_offsets":[160,172]}' '\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00'
mha_with mha_kpm '"key_padding_mask":{"dtype":"BOOL","shape":[2,3],"data_offsets":[160,166]}' '\x00\x01\x00\x00\x01\x00'
mha_with mha_blocked '"attn_mask":{"dtype":"BOOL","shape":[2,2],"data_offsets":[160,164]}' '\x01\x01\x01\x01'
add_hdr='"q":{"dtype":"F32","shape":[2,1,2],"data_offsets":[0,16]},"k":{"dtype":"F32","shape":[2,2,2],"data_offsets":[16,48]},"v":{"dtype":"F32","shape":[2,2,2],"data_offsets":[48,80]},"W_q.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[80,96]},"W_k.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[96,112]},"w_v.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[112,120]}'
add_data="$(f32 1 0 0 1)$v8$v8$(f32 1 0 0 1)$(f32 0 1 1 0)$(f32 1 -1)"
st_file "$in/add_kpm.safetensors" "{$add_hdr,\"key_padding_mask\":{\"dtype\":\"BOOL\",\"shape\":[2,2],\"data_offsets\":[120,124]}}" "$add_data\\x00\\x01\\x00\\x00"
st_file "$in/add_lens_short.safetensors" "{$add_hdr,\"valid_lens\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[120,128]}}" "$add_data$(lens 1)"
st_file "$in/nw_lens.safetensors" '{"q":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"k":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]},"v":{"dtype":"F32","shape":[2,2],"data_offsets":[24,40]},"valid_lens":{"dtype":"I64","shape":[2],"data_offsets":[40,56]}}' "$(f32 0 1 0 1 1 0 1 1 0 0)$(lens 1 1)"
lin_hdr='"x":{"dtype":"F32","shape":[2,2,2],"data_offsets":[0,32]},"to_query.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[32,48]},"to_query.bias":{"dtype":"F32","shape":[2],"data_offsets":[48,56]},"to_key.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[56,72]},"to_key.bias":{"dtype":"F32","shape":[2],"data_offsets":[72,80]},"to_value.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[80,96]},"to_value.bias":{"dtype":"F32","shape":[2],"data_offsets":[96,104]}'
lin_data="$v8$(f32 1 0 0 1 0 0 1 0 0 1 0 0 1 0 0 1 0 0)"
st_file "$in/lin_mask.safetensors" "{$lin_hdr,\"attn_mask\":{\"dtype\":\"BOOL\",\"shape\":[2,2],\"data_offsets\":[104,108]}}" "$lin_data\\x01\\x00\\x01\\x01"
st_file "$in/lin_kpm.safetensors" "{$lin_hdr,\"key_padding_mask\":{\"dtype\":\"BOOL\",\"shape\":[2,3],\"data_offsets\":[104,110]}}" "$lin_data\\x00\\x00\\x01\\x00\\x00\\x01"

sd() { "$bin" op sdpa --in "$in/$1.safetensors" --out "$o" "${@:2}"; }
mh() { "$bin" op mha --batch-first --num-heads 1 --in "$in/$1.safetensors" --out "$o" "${@:2}"; }
row "op sdpa: valid_lens with fewer entries than B"   1 "valid_lens has shape \(1\); expected \(B\) = \(2\) or \(B, Lq\) = \(2, 2\)" "$o" -- sd lens_short
row "op sdpa: valid_lens with more entries than B"    1 "valid_lens has shape \(3\); expected \(B\) = \(2\)" "$o" -- sd lens_long
row "op sdpa: valid_lens (B, Lq+1)"                   1 "valid_lens has shape \(2, 3\); expected .* \(B, Lq\) = \(2, 2\)" "$o" -- sd lens_query
row "op sdpa: valid_lens with 3 dims"                 1 "valid_lens is I64 with 3 dims; expected an integer dtype .* \(B\) or \(B, Lq\)" "$o" -- sd lens_3d
row "op sdpa: a negative valid_len"                   1 "valid_lens\[1\] = -1; expected >= 0" "$o" -- sd lens_negative
row "op sdpa: valid_lens as F32"                      1 "valid_lens is F32 with 1 dims; expected an integer dtype" "$o" -- sd lens_float
row "op sdpa: key_padding_mask (B, Lk+1)"             1 "key_padding has shape \(2, 3\); expected \(B, Lk\) = \(2, 2\)" "$o" -- sd kpm_long
row "op sdpa: key_padding_mask (B+1, Lk)"             1 "key_padding has shape \(3, 2\); expected \(B, Lk\) = \(2, 2\)" "$o" -- sd kpm_batch
row "op sdpa: key_padding_mask with 1 dim"            1 "key_padding_mask is BOOL with 1 dims; expected BOOL \(B, Lk\)" "$o" -- sd kpm_1d
row "op sdpa: a float key_padding_mask"               1 "key_padding_mask is F32 with 2 dims; expected BOOL \(B, Lk\)" "$o" -- sd kpm_float
row "op sdpa: an I64 attn_mask (refused, not added)"  1 "attn_mask is I64; F.scaled_dot_product_attention takes a BOOL mask \(true = may attend\)" "$o" -- sd mask_i64
row "op sdpa: a U8 attn_mask (refused, as SDPA does)" 1 "attn_mask is U8; F.scaled_dot_product_attention takes a BOOL mask" "$o" -- sd mask_u8
row "op sdpa: attn_mask (3, 2) does not broadcast"    1 "attend mask has shape \(3, 2\), which does not broadcast to \(B, H, Lq, Lk\) = \(2, 1, 2, 2\)" "$o" -- sd mask_shape
row "op sdpa: attn_mask with 5 dims"                  1 "attn_mask has 5 dims; expected 1 to 4" "$o" -- sd mask_5d
row "op sdpa: grad_out of out's size, other shape"    1 "grad_out has shape \(2, 2, 1, 2\), expected out's shape \(2, 1, 2, 2\)" "$o" -- sd grad_reshaped
row "op mha: an I64 attn_mask (refused, not added)"   1 "attn_mask is I64; nn.MultiheadAttention takes a BOOL mask \(true = not allowed to attend\)" "$o" -- mh mha_mask_i64
u8_mask() { mh mha_mask_u8 || return; note="read as BOOL, as torch 1.13"; rm -f "$o"; }
row "op mha: a U8 attn_mask (torch 1.13 reads it)"    0 "attn_mask is U8, read as BOOL as nn.MultiheadAttention does" -- u8_mask
row "op mha: 3-D attn_mask (3, L, S), B*H = 2"        1 "the 3-D blocked mask is \(3, 2, 2\); expected \(B\*H, Lq, Lk\) = \(2, 2, 2\)" "$o" -- mh mha_mask3d
row "op mha: key_padding_mask (B, Lk+1)"              1 "key_padding has shape \(2, 3\); expected \(B, Lk\) = \(2, 2\)" "$o" -- mh mha_kpm
# every key blocked in PyTorch's polarity: each row is fully masked, so the attention is 0 and the
# output is out_proj's bias (none here): all zeros; the opposite polarity would attend everywhere
all_blocked() {
  mh mha_blocked || return
  local bytes; bytes=$(tail -c 32 "$o" | od -An -v -tx1 | command tr -d ' \n')
  [[ $bytes =~ ^0+$ ]] && note="every row 0: true = not allowed" || note="FAIL: output not zero: $bytes"
  rm -f "$o"
}
row "op mha: attn_mask all true blocks every key"     0 "" -- all_blocked
row "op additive: key_padding_mask is not taken"      1 "the input has a tensor named key_padding_mask, which additive does not take" "$o" -- "$bin" op additive --in "$in/add_kpm.safetensors" --out "$o"
row "op additive: valid_lens with fewer entries"      1 "additive_attention: valid_lens has shape \(1\); expected \(B\) = \(2\)" "$o" -- "$bin" op additive --in "$in/add_lens_short.safetensors" --out "$o"
row "op nw: valid_lens is not taken"                  1 "a tensor named valid_lens, which nw does not take" "$o" -- "$bin" op nw --in "$in/nw_lens.safetensors" --out "$o"
row "op linear: attn_mask is not taken"               1 "a tensor named attn_mask, which linear does not take" "$o" -- "$bin" op linear --in "$in/lin_mask.safetensors" --out "$o"
row "op linear: key_padding_mask (B, L+1)"            1 "linear_attention: key_padding has shape \(2, 3\); expected \(B, Lk\) = \(2, 2\)" "$o" -- "$bin" op linear --in "$in/lin_kpm.safetensors" --out "$o"
row "op: --causal with additive"                      2 "--causal does not apply to additive" "$o" -- "$bin" op additive --causal --in "$in/add_kpm.safetensors" --out "$o"
row "op: --scale with mha"                            2 "--scale applies to sdpa only" "$o" -- mh mha_kpm --scale 0.5
row "op: --shen with sdpa"                            2 "--shen applies to linear only" "$o" -- sd lens_short --shen
row "op: --num-heads with sdpa"                       2 "--num-heads does not apply to sdpa" "$o" -- sd lens_short --num-heads 2
row "op: no NAME"                                     2 "missing NAME" "$o" -- "$bin" op --in "$in/good.safetensors" --out "$o"
row "op: two NAMEs"                                   2 "unexpected argument \"mha\"" "$o" -- "$bin" op sdpa mha --in "$in/good.safetensors" --out "$o"

# ---- checkpoints for inference: incomplete, non-finite, metadata out of range ----------------
"$bin" classify train "${tiny[@]}" --epochs 1 --data "$in/imdb" --checkpoint "$in/cls.safetensors" >/dev/null 2>&1
cls_ck() { # NAME SED_EXPR: a broken copy of the classifier checkpoint (its vocabulary inside)
  st_rewrite "$in/cls.safetensors" "$in/$1.safetensors" "$2"
}
cls_ck cls_missing 's/"embedding\.weight"/"embedding.weigh_"/'
cls_ck cls_blocks 's/"num_blocks":"0"/"num_blocks":"100000"/'
cls_ck cls_negdim 's/"embed_dim":"16"/"embed_dim":"-5"/'
cls_ck cls_kind 's/"attention":"0"/"attention":"7"/'
cls_ck cls_vocab_text 's/"vocab_size":"[0-9]*"/"vocab_size":"abc"/'
cls_ck cls_heads 's/"num_heads":"2"/"num_heads":"3"/'
cls_ck cls_epoch 's/"run.epoch":"[0-9]*"/"run.epoch":"-5"/'
cls_ck cls_batch 's/"run.batch":"[0-9]*"/"run.batch":"999999"/'
cls_ck cls_noepoch 's/"run.epoch":"[0-9]*",//'
cls_ck cls_extra 's/"exp_avg\.embedding\.weight"/"stray.embedding.weight"/'
st_poison "$in/cls.safetensors" "$in/cls_nan.safetensors" "classifier.0.weight"
ev() { "$bin" classify eval --data "$in/imdb" --checkpoint "$in/$1.safetensors"; }
row "classify eval: a parameter missing"              1 "cls_missing.safetensors: the file does not fit the parameters: missing 1: \"embedding.weight\"; unexpected 1: \"embedding.weigh_\"" -- ev cls_missing
row "classify eval: a NaN parameter"                  1 "tensor \"classifier.0.weight\" has NaN at index \(0, 0\)" -- ev cls_nan
row "classify predict: a NaN parameter"               1 "tensor \"classifier.0.weight\" has NaN" -- "$bin" classify predict --checkpoint "$in/cls_nan.safetensors" "a fine film"
row "classify explain: a parameter missing"           1 "missing 1: \"embedding.weight\"" "$out/x.png" -- "$bin" classify explain --checkpoint "$in/cls_missing.safetensors" --out "$out/x.png" "a fine film"
row "classify eval: metadata num_blocks=100000"       1 "metadata num_blocks = 100000 is out of range \[0, 64\]" -- ev cls_blocks
row "classify eval: metadata embed_dim=-5"            1 "metadata embed_dim = -5 is out of range \[1, 4096\]" -- ev cls_negdim
row "classify eval: metadata attention=7"             1 "metadata attention = 7 is out of range \[0, 3\]" -- ev cls_kind
row "classify eval: metadata vocab_size=abc"          1 "metadata vocab_size is \"abc\"; expected an integer" -- ev cls_vocab_text
row "classify eval: metadata heads do not divide E"   1 "metadata num_heads 3 does not divide embed_dim 16" -- ev cls_heads
row "classify eval: an unexpected tensor"             1 "unexpected 1: \"stray.embedding.weight\"" -- ev cls_extra
resume_from() { cp "$in/$1.safetensors" "$ck"; cls --data "$in/imdb" --epochs 2 --resume; local rc=$?; rm -f "$ck" "$ck.vocab"; return $rc; }
row "classify --resume: run.epoch=-5"                 1 "run position epoch -5, batch 0 is out of range" -- resume_from cls_epoch
row "classify --resume: run.batch=999999"             1 "run position epoch 1, batch 999999 is out of range \(epoch in \[0, 100000\], batch in \[0, 5\]" -- resume_from cls_batch
row "classify --resume: no run.epoch"                 1 "has no run position" -- resume_from cls_noepoch

"$bin" translate train --d-model 16 --heads 2 --ffn 16 --layers 1 --epochs 1 --batch-size 4 --min-freq 1 --threads 1 --beam 1 --data "$in/pairs" --checkpoint "$in/tr.safetensors" >/dev/null 2>&1
tr_ck() { # NAME SED_EXPR
  st_rewrite "$in/tr.safetensors" "$in/$1.safetensors" "$2"
}
tr_ck tr_kind 's/"kind":"0"/"kind":"5"/'
tr_ck tr_eos 's/"eos_id":"[0-9]*"/"eos_id":"99999"/'
tr_ck tr_missing 's/"generator\.weight"/"generator.weigh_"/'
st_poison "$in/tr.safetensors" "$in/tr_nan.safetensors" "generator.weight"
te() { "$bin" translate eval --beam 1 --data "$in/pairs" --checkpoint "$in/$1.safetensors" "${@:2}"; }
row "translate eval: metadata kind=5"                 1 "metadata kind = 5 is out of range \[0, 1\]" -- te tr_kind
row "translate eval: metadata eos_id past the vocabulary" 1 "pad_id, bos_id and eos_id must be below tgt_vocab" -- te tr_eos
row "translate eval: a parameter missing"             1 "missing 1: \"generator.weight\"" -- te tr_missing
row "translate translate: a NaN parameter"            1 "tensor \"generator.weight\" has NaN" "$out/x.png" -- "$bin" translate translate --checkpoint "$in/tr_nan.safetensors" --out "$out/x.png" "A man ."
row "translate eval: --average with a NaN checkpoint" 1 "--average: .*tr_nan.safetensors: tensor \"generator.weight\" has NaN" -- te tr --average "$in/tr_nan.safetensors"

# ---- output files: devices, FIFOs, symlinks, long names ----------------------------------------
good_op() { "$bin" op sdpa --in "$in/good.safetensors" --out "$1"; }
dev_null() { good_op /dev/null || return; [[ -c /dev/null ]] && note="/dev/null is still a character device" || note="FAIL: /dev/null replaced"; }
row "op --out /dev/null (as root: never replaced)"    0 "" -- dev_null
mknod_dev() {
  if ! mknod "$out/dev" c 1 3 2>/dev/null; then note="skipped: mknod not permitted here"; return 0; fi
  good_op "$out/dev" || { rm -f "$out/dev"; return 1; }
  [[ -c $out/dev ]] && note="a mknod'd character device stays a device" || note="FAIL: the device became a $(stat -c %F "$out/dev")"
  rm -f "$out/dev"
}
row "op --out a character device made with mknod"     0 "" -- mknod_dev
full_dev() {
  good_op /dev/full; local rc=$?
  [[ -c /dev/full ]] || note="FAIL: /dev/full replaced"
  return $rc
}
row "op --out /dev/full (written in place: ENOSPC)"   1 "/dev/full: cannot write: No space left on device" -- full_dev
symlinked() {
  ln -s target.safetensors "$out/link.safetensors"
  good_op "$out/link.safetensors" || return
  [[ -L $out/link.safetensors && -f $out/target.safetensors ]] && note="the link stays, its target is written" || note="FAIL: the link was replaced"
  rm -f "$out/link.safetensors" "$out/target.safetensors"
}
row "op --out a symlink: its target is replaced"      0 "" -- symlinked
dangling() {
  mkdir -p "$out/sub"; ln -s sub/new.safetensors "$out/dangling.safetensors"
  good_op "$out/dangling.safetensors" || return
  [[ -L $out/dangling.safetensors && -s $out/sub/new.safetensors ]] && note="the link's target is created" || note="FAIL: dangling link not followed"
  rm -rf "$out/dangling.safetensors" "$out/sub"
}
row "op --out a dangling symlink"                     0 "" -- dangling
long_name() {
  local name; name=$(printf 'n%.0s' {1..238}).safetensors # 250 bytes: a legal name
  good_op "$out/$name" || return
  [[ -s $out/$name ]] && note="a 250-byte name is written" || note="FAIL: not written"
  rm -f "$out/$name"
}
row "op --out a 250-byte file name"                   0 "" -- long_name
row "op --out a 256-byte file name"                   2 "the file name has 256 bytes; at most 255 fit" -- good_op "$out/$(printf 'n%.0s' {1..244}).safetensors"
row "op --out a path longer than PATH_MAX"            2 "the path has [0-9]+ bytes; at most 4095 fit" -- good_op "$out/$(printf 'd/%.0s' {1..2100})o.safetensors"
row "op --out a folder"                               2 "--out .*out: cannot write: it is a folder" -- good_op "$out"
fifo_out() {
  mkfifo "$out/pipe"
  (cat "$out/pipe" > "$out/from_pipe") & local reader=$!
  good_op "$out/pipe"; local rc=$?
  wait $reader
  [[ -p $out/pipe && -s $out/from_pipe ]] && note="written through the FIFO, which stays" || note="FAIL: FIFO replaced or empty"
  rm -f "$out/pipe" "$out/from_pipe"
  return $rc
}
row "op --out a FIFO with a reader"                   0 "" -- fifo_out
stale_tmp() {
  : > "$out/o.safetensors.tmp.2147480000.00000000deadbeef"    # the form of ours, a pid that does not run
  good_op "$out/o.safetensors" || return
  [[ -e $out/o.safetensors.tmp.2147480000.00000000deadbeef ]] && note="FAIL: the dead writer's temporary file is still there" || note="the dead writer's temporary file was removed"
  rm -f "$out/o.safetensors"
}
row "op --out: a dead writer's temporary file"        0 "" -- stale_tmp
keep_mode() {
  good_op "$out/m.safetensors" && chmod 640 "$out/m.safetensors" && good_op "$out/m.safetensors" || return
  [[ $(stat -c %a "$out/m.safetensors") == 640 ]] && note="replaced, mode 640 kept" || note="FAIL: mode $(stat -c %a "$out/m.safetensors")"
  rm -f "$out/m.safetensors"
}
row "op --out: a replaced file keeps its mode"        0 "" -- keep_mode
nothing_left() { # a failed start leaves neither checkpoint nor vocabulary
  "$bin" classify train "${tiny[@]}" --data "$in/imdb_notest" --checkpoint "$out/ck2.safetensors"
}
mkdir -p "$in/imdb_notest"; cp -r "$in/imdb/train" "$in/imdb_notest/"
row "classify train: a failed start leaves nothing"   1 "imdb_notest/test/neg: cannot open the folder" "$out/ck2.safetensors" "$out/ck2.safetensors.vocab" -- nothing_left
row "classify train: --checkpoint ''"                 2 "--checkpoint is empty; expected a file name" "$out/.vocab" -- bash -c 'cd "$1" && shift && "$@"' _ "$out" "$bin" classify train "${tiny[@]}" --data "$in/imdb" --checkpoint ''
row "classify train: --plot-loss x.bmp, before work"  2 "--plot-loss .*x.bmp: unknown picture format" "$ck" "$ck.vocab" -- cls --data "$in/imdb" --plot-loss "$out/x.bmp"
row "classify train: --plot-loss in a missing folder" 2 "--plot-loss .*nowhere/x.png: cannot write: folder" "$ck" "$ck.vocab" -- cls --data "$in/imdb" --plot-loss "$out/nowhere/x.png"
row "classify explain: --out x.gif, before loading"   2 "--out .*x.gif: unknown picture format" -- "$bin" classify explain --checkpoint "$in/cls.safetensors" --out "$out/x.gif" "fine"
row "classify eval: a TEXT argument"                  2 "eval takes no TEXT arguments" -- "$bin" classify eval --data "$in/imdb" --checkpoint "$in/cls.safetensors" "stray"
row "classify train: --heads 3 with --embed-dim 16"   2 "--heads 3 must divide --embed-dim 16" "$ck" -- cls --data "$in/imdb" --heads 3
row "translate train: --heads 3 with --d-model 16"    2 "--heads 3 must divide --d-model 16" "$ck" -- tr --data "$in/pairs" --heads 3
row "translate train: bahdanau --layers 9"            2 "--layers 9: the Bahdanau GRU has at most 8 layers" "$ck" -- tr --data "$in/pairs" --model bahdanau --layers 9
row "translate train: --plot-loss x.jpg"              2 "--plot-loss .*x.jpg: unknown picture format" "$ck" -- tr --data "$in/pairs" --plot-loss "$out/x.jpg"
row "translate translate: --out in a missing folder"  2 "--out .*nowhere/x.png: cannot write: folder" -- "$bin" translate translate --checkpoint "$in/tr.safetensors" --out "$out/nowhere/x.png" "A man ."
row "translate eval: --average of a missing file"     2 "--average .*nope.safetensors: No such file" -- te tr --average "$in/nope.safetensors"
row "nw: --plot-loss x.jpg"                           2 "--plot-loss x.jpg: unknown picture format" -- "$bin" nw --plot-loss x.jpg
row "nw: --data a FIFO (never blocks)"                2 "--data .*fifo.safetensors: is not a regular file" -- timeout 20 "$bin" nw --data "$in/fifo.safetensors"

# ---- loaders meet non-regular files -----------------------------------------------------------
cp -r "$in/imdb" "$in/imdb_special"
mkfifo "$in/imdb_special/train/pos/90_9.txt"
ln -s /dev/null "$in/imdb_special/train/neg/91_1.txt"
ln -s nowhere.txt "$in/imdb_special/test/pos/92_9.txt"
special() {
  timeout 60 "$bin" classify train "${tiny[@]}" --epochs 1 --data "$in/imdb_special" --checkpoint "$ck" || return
  note="2 skipped in train, 1 in test; trained"
  rm -f "$ck" "$ck.vocab"
}
row "classify: a FIFO, a device and a broken link named like reviews" 0 "train: skipped 2 entries named like reviews that are not regular files" -- special
mkdir -p "$in/pairs_fifo"; cp "$in"/pairs/*.gz "$in/pairs_fifo/"; rm "$in/pairs_fifo/train.en.gz"; mkfifo "$in/pairs_fifo/train.en.gz"
row "translate: a FIFO as train.en.gz (never blocks)" 1 "train.en.gz: not a regular file \(a FIFO\)" "$ck" -- timeout 20 "$bin" translate train --d-model 16 --heads 2 --ffn 16 --layers 1 --epochs 1 --min-freq 1 --threads 1 --data "$in/pairs_fifo" --checkpoint "$ck"
cp -r "$in/imdb" "$in/imdb_latin1_test"
printf 'caf\xe9\n' > "$in/imdb_latin1_test/test/neg/3_2.txt"
row "classify: a test review that is not UTF-8"       1 "imdb_latin1_test/test/neg/3_2.txt: invalid UTF-8 at byte offset 3" "$ck" "$ck.vocab" -- cls --data "$in/imdb_latin1_test"

# ---- stdout is line-buffered when it is not a terminal -----------------------------------------
line_buffered() { # predict prints each answer at once, though stdin stays open and stdout is a file
  mkfifo "$out/stdin"
  "$bin" classify predict --checkpoint "$in/cls.safetensors" < "$out/stdin" > "$out/predictions" &
  local pid=$!
  exec 7> "$out/stdin"
  echo "a wonderful film" >&7
  local i
  for ((i = 0; i < 100; i++)); do grep -q "wonderful" "$out/predictions" 2>/dev/null && break; sleep 0.1; done
  grep -q "wonderful" "$out/predictions" && note="the answer was in the file before stdin closed" || note="FAIL: nothing written before stdin closed"
  exec 7>&-
  wait $pid
  rm -f "$out/stdin" "$out/predictions"
}
row "classify predict: stdout line-buffered in a file" 0 "" -- line_buffered

# ---- a second hostile review: two options naming one file, NUL bytes, --eval-limit -------------
row "classify train: --plot-loss the checkpoint's name" 2 "--plot-loss .*same.png: the same file as --checkpoint .*same.png" "$out/same.png" "$out/same.png.vocab" -- "$bin" classify train "${tiny[@]}" --data "$in/imdb" --checkpoint "$out/same.png" --plot-loss "$out/same.png"
explain_over_checkpoint() { # --out names the checkpoint it reads
  cp "$in/cls.safetensors" "$out/m.png"
  "$bin" classify explain --checkpoint "$out/m.png" --out "$out/./m.png" "a film"
  local rc=$?
  cmp -s "$in/cls.safetensors" "$out/m.png" && note="the checkpoint is untouched" || note="FAIL: the checkpoint was replaced"
  rm -f "$out/m.png" "$out/m.png.vocab"
  return $rc
}
row "classify explain: --out the checkpoint it reads" 2 "--out .*m.png: the same file as --checkpoint .*m.png" -- explain_over_checkpoint
row "nw: --plot the same file as --out" 2 "--plot .*r.png: the same file as --out .*r.png" "$out/r.png" -- "$bin" nw --epochs 1 --out "$out/r.png" --plot "$out/r.png"
row "nw: --plot-loss the same new file as --plot" 2 "--plot-loss .*p.svg: the same file as --plot .*p.svg" "$out/p.svg" -- "$bin" nw --epochs 1 --plot "$out/p.svg" --plot-loss "$out/../$(basename "$out")/p.svg"
row "translate eval: --average of no files" 2 "--average expects files separated by commas, got \",\"" -- "$bin" translate eval --data "$in/pairs" --average ","
row "translate eval: --average naming a folder" 2 "--average .*pairs: is a folder; expected a file" -- "$bin" translate eval --data "$in/pairs" --average "$in/cls.safetensors,$in/pairs"
row "tour: --save inside the --data it reads" 2 "--save .*imdb/saved: inside the folder --data .*imdb" "$in/imdb/saved" -- "$bin" tour 002/6.1 --data "$in/imdb" --out-dir "$out" --save "$in/imdb/saved"
ln -sf "$in/lens_short.safetensors" "$out/link.safetensors"
row "op: --out the file --in reads, through a symlink" 2 "--out .*lens_short.safetensors: the same file as --in .*link.safetensors" -- "$bin" op sdpa --in "$out/link.safetensors" --out "$in/lens_short.safetensors"
rm -f "$out/link.safetensors"
cp -r "$in/imdb" "$in/imdb_nul"
printf 'zebra\0 quokka\n' > "$in/imdb_nul/train/pos/0_10.txt"
row "classify: a review with a NUL byte" 1 "0_10.txt: a NUL byte at byte offset 5; expected text" "$ck" "$ck.vocab" -- "$bin" classify train "${tiny[@]}" --data "$in/imdb_nul" --checkpoint "$ck"
make_pairs "$in/pairs_nul" 12
{ printf 'A zebra\0 quokka .\n'; gzip -dc "$in/pairs_nul/train.en.gz" | tail -n +2; } | gzip > "$in/pairs_nul/x.gz" && mv "$in/pairs_nul/x.gz" "$in/pairs_nul/train.en.gz"
row "translate: a sentence with a NUL byte" 1 "train.en.gz: a NUL byte at byte offset 7; expected text" "$ck" -- tr --data "$in/pairs_nul"
predict_nul() { printf 'good\0film\n' | "$bin" classify predict --checkpoint "$in/cls.safetensors"; }
row "classify predict: a NUL byte on stdin" 1 "standard input, line 1: a NUL byte at byte offset 4; expected text" -- predict_nul
eval_limit() { # the pairs past --eval-limit are freed too (LeakSanitizer)
  tr --data "$in/pairs" --eval-limit 2 --max-steps 1
  local rc=$?
  rm -f "$ck" "$ck.src.vocab" "$ck.tgt.vocab"
  return $rc
}
row "translate: --eval-limit 2 (no leak of the pairs left out)" 0 "" -- eval_limit
row "classify: --sinusoidal with an odd --embed-dim" 2 "--sinusoidal needs an even --embed-dim, got 15" "$ck" "$ck.vocab" -- "$bin" classify train "${tiny[@]}" --embed-dim 15 --heads 1 --sinusoidal --data "$in/imdb" --checkpoint "$ck"
row "translate: an odd --d-model" 2 "--d-model 15: the Transformer's sinusoidal positions need an even width" "$ck" -- tr --data "$in/pairs" --d-model 15 --heads 1
row "op: --threads 2000" 2 "--threads must be in \[1, 1024\], got 2000" -- "$bin" op sdpa --in "$in/lens_short.safetensors" --out "$o" --threads 2000
tour_unwritable_figure() { # a figure that cannot be written: one message, exit 1
  mkdir -p "$out/tour/002_2.2_weights.png"
  "$bin" tour 002/2.2 --out-dir "$out/tour" 2> "$out/tour.err"
  local rc=$? n
  n=$(grep -c "cannot write" "$out/tour.err")
  cat "$out/tour.err" >&2
  [[ $n == 1 ]] && note="one message" || note="FAIL: the error printed $n times"
  rm -rf "$out/tour" "$out/tour.err"
  return $rc
}
row "tour: a figure that cannot be written" 1 "002/2.2: .*002_2.2_weights.png: cannot write" -- tour_unwritable_figure
resume_other_words() { # --resume on data whose words differ: the saved vocabulary stays, ids keep their rows
  cp "$in/cls.safetensors" "$out/r.safetensors"
  rm -rf "$in/imdb_other" && cp -r "$in/imdb" "$in/imdb_other"
  grep -rl "film" "$in/imdb_other" | xargs sed -i 's/film/movie/g'
  "$bin" classify train "${tiny[@]}" --epochs 2 --data "$in/imdb_other" --checkpoint "$out/r.safetensors" --resume >/dev/null
  local rc=$?
  [[ $(attn_vocab_of "$in/cls.safetensors" vocab) == "$(attn_vocab_of "$out/r.safetensors" vocab)" ]] &&
    note="the saved vocabulary is kept" || note="FAIL: the vocabulary was rebuilt from --data"
  rm -f "$out/r.safetensors" "$out/r.safetensors.vocab"
  return $rc
}
row "classify --resume on data with other words" 0 "" -- resume_other_words
resume_other_heads() { # --resume with options that build another model of the same parameter shapes
  cp "$in/cls.safetensors" "$out/h.safetensors" &&
    "$bin" classify train "${tiny[@]}" --heads 1 --data "$in/imdb" --checkpoint "$out/h.safetensors" --resume
  local rc=$?
  rm -f "$out/h.safetensors" "$out/h.safetensors.vocab"
  return $rc
}
row "classify --resume with other --heads" 2 "has num_heads 2 in its metadata, these options give 1" -- resume_other_heads
resume_no_vocab() { # a checkpoint of an older attn (no vocabulary inside) without its .vocab
  st_rewrite "$in/cls.safetensors" "$out/r.safetensors" 's/,"vocab":"[^"]*"//'
  "$bin" classify train "${tiny[@]}" --data "$in/imdb" --checkpoint "$out/r.safetensors" --resume
  local rc=$?
  [[ -e $out/r.safetensors.vocab ]] && note="FAIL: a vocabulary was made up" || note="none made up"
  rm -f "$out/r.safetensors" "$out/r.safetensors.vocab"
  return $rc
}
row "classify --resume: older checkpoint without its .vocab" 1 "r.safetensors.vocab: cannot open" -- resume_no_vocab
swapped_specials() { # <pad> and <bos> swapped in the target vocabulary inside the checkpoint
  st_rewrite "$in/tr.safetensors" "$out/t.safetensors" 's/"vocab.tgt":"<unk>\\u000a<pad>\\u000a<bos>/"vocab.tgt":"<unk>\\u000a<bos>\\u000a<pad>/'
  "$bin" translate eval --data "$in/pairs" --beam 1 --checkpoint "$out/t.safetensors"
  local rc=$?
  rm -f "$out"/t.safetensors*
  return $rc
}
row "translate eval: <pad> and <bos> swapped in the target vocabulary" 1 "t.safetensors: its target vocabulary has <pad> at id 2; expected the specials <unk>, <pad>, <bos>, <eos> first" -- swapped_specials
# options that do not apply to the action, the workload or the mechanism
row "classify eval --epochs (a train option)" 2 "--epochs applies to train only, not to eval" -- "$bin" classify eval --data "$in/imdb" --checkpoint "$in/cls.safetensors" --epochs 3
row "classify train --out (an explain option)" 2 "--out applies to explain only, not to train" "$ck" -- "$bin" classify train "${tiny[@]}" --data "$in/imdb" --checkpoint "$ck" --out "$out/x.png"
row "classify train --additive-hidden with softmax" 2 "--additive-hidden applies with --attention additive only" "$ck" -- "$bin" classify train "${tiny[@]}" --data "$in/imdb" --checkpoint "$ck" --additive-hidden 8
row "classify train --pre-ln without --blocks" 2 "--pre-ln applies with --blocks N" "$ck" -- "$bin" classify train "${tiny[@]}" --data "$in/imdb" --checkpoint "$ck" --pre-ln
row "translate eval --d-model (read from the checkpoint)" 2 "--d-model applies to train only, not to eval" -- "$bin" translate eval --data "$in/pairs" --checkpoint "$in/tr.safetensors" --d-model 32
row "translate translate --split" 2 "--split applies to train and eval only, not to translate" "$out/x.png" -- "$bin" translate translate --checkpoint "$in/tr.safetensors" --split val --out "$out/x.png" "A man ."
row "bench peak --causal" 2 "--causal applies to sdpa only" -- "$bin" bench peak --causal
row "op linear --need-weights" 2 "--need-weights: linear attention has no \(Lq, Lk\) weights" "$o" -- "$bin" op linear --in "$in/lens_short.safetensors" --out "$o" --need-weights
row "plot --panel-titles without --grid" 2 "--panel-titles applies with --grid only" "$out/x.png" -- "$bin" plot heatmap --in "$in/heat3.safetensors" --tensor w --index 0 --panel-titles a,b --out "$out/x.png"
ln -sf /dev/full "$out/full.png"
row "nw: a picture that fails after --out was written" 1 "full.png: .*No space left on device" "$out/res.safetensors" -- "$bin" nw --epochs 2 --out "$out/res.safetensors" --plot "$out/full.png"
rm -f "$out/full.png"

# ---- a third hostile review: standard output, FIFOs without readers, /dev/stdout, checkpoints ----
to_full() { "$@" > /dev/full; }
row "attn --man > /dev/full" 1 "attn: standard output: " -- to_full "$bin" --man
row "classify predict > /dev/full" 1 "attn: standard output: " -- to_full "$bin" classify predict --checkpoint "$in/cls.safetensors" "great film"
fifo_no_reader() {
  mkfifo "$out/noreader"
  timeout 20 "$bin" op sdpa --in "$in/good.safetensors" --out "$out/noreader"; local rc=$?
  rm -f "$out/noreader"
  return $rc
}
row "op --out a FIFO without a reader (never blocks)" 1 "noreader: cannot write: the FIFO has no reader" "$o" -- fifo_no_reader
stdout_pipe() { # /dev/stdout is a pipe: written into it
  good_op /dev/stdout | cat > "$out/piped"; local rc=${PIPESTATUS[0]}
  [[ $(stat -c %s "$out/piped") == "$(good_op "$o" >/dev/null && stat -c %s "$o")" ]] && note="the pipe got the whole file" ||
    note="FAIL: the pipe got $(stat -c %s "$out/piped") bytes"
  rm -f "$out/piped" "$o"
  return $rc
}
row "op --out /dev/stdout, a pipe" 0 "" -- stdout_pipe
stdout_append() { # /dev/stdout is a log opened for append: the bytes are appended, the log kept
  echo "earlier line" > "$out/log"
  good_op /dev/stdout >> "$out/log"; local rc=$?
  [[ $(head -1 "$out/log") == "earlier line" && $(stat -c %s "$out/log") -gt 13 ]] && note="appended to the log" ||
    note="FAIL: the log was replaced or not written"
  rm -f "$out/log"
  return $rc
}
row "op --out /dev/stdout >> log" 0 "" -- stdout_append
stdout_closed() { good_op /dev/stdout >&-; }
row "op --out /dev/stdout, stdout closed" 2 "--out /dev/stdout: cannot write: descriptor 1 is not open" -- stdout_closed
row "op --out /dev/fd/N past any descriptor" 2 "--out /dev/fd/99999999999: cannot write: descriptor [0-9]+ is not open" -- good_op /dev/fd/99999999999
limited() { (trap '' XFSZ; ulimit -f 16; exec "$@"); } # files over 16 KiB fail (EFBIG)
row "classify: the first checkpoint fails, no vocabulary left" 1 "lim.safetensors: cannot write .*File too large" "$out/lim.safetensors" "$out/lim.safetensors.vocab" -- \
  limited "$bin" classify train "${tiny[@]}" --epochs 1 --data "$in/imdb" --checkpoint "$out/lim.safetensors"
row "translate: the first checkpoint fails, no vocabularies left" 1 "lim.safetensors: cannot write .*File too large" "$out/lim.safetensors" "$out/lim.safetensors.src.vocab" "$out/lim.safetensors.tgt.vocab" -- \
  limited "$bin" translate train --d-model 32 --heads 2 --ffn 32 --layers 1 --epochs 1 --batch-size 4 --min-freq 1 --threads 1 --data "$in/pairs" --checkpoint "$out/lim.safetensors"
[[ -e /dev/null.vocab ]] || row "classify: --checkpoint /dev/null (refused up front)" 2 "/dev/null: it is not a regular file; a checkpoint must be one" /dev/null.vocab -- \
  "$bin" classify train "${tiny[@]}" --epochs 1 --data "$in/imdb" --checkpoint /dev/null
[[ -e /dev/null.src.vocab ]] || row "translate: --checkpoint /dev/null (refused up front)" 2 "/dev/null: it is not a regular file; a checkpoint must be one" /dev/null.src.vocab -- \
  "$bin" translate train --d-model 16 --heads 2 --ffn 16 --layers 1 --epochs 1 --batch-size 4 --min-freq 1 --threads 1 --data "$in/pairs" --checkpoint /dev/null
linked_checkpoint() { # the link stays, its target is the checkpoint (vocabulary inside), read through either name
  mkdir -p "$out/real" && ln -s real/m.safetensors "$out/m.safetensors"
  "$bin" classify train "${tiny[@]}" --epochs 1 --data "$in/imdb" --checkpoint "$out/m.safetensors" >/dev/null || return
  local rc=0
  "$bin" classify predict --checkpoint "$out/real/m.safetensors" "a fine film" >/dev/null || rc=1
  "$bin" classify predict --checkpoint "$out/m.safetensors" "a fine film" >/dev/null || rc=1
  [[ -L $out/m.safetensors && -f $out/real/m.safetensors && $rc == 0 && -z $(ls "$out/real" | grep -v '^m.safetensors$') ]] &&
    note="the link stays, its target written alone; read through the link and the target" || note="FAIL: $(ls "$out" "$out/real")"
  rm -rf "$out/real" "$out/m.safetensors"
}
row "classify: --checkpoint a symlink: its target is the checkpoint" 0 "" -- linked_checkpoint
nw_keeps_old() { # a later output fails: a file that was there before is not deleted
  ln -sf /dev/full "$out/full.png"; echo old > "$out/res.safetensors"
  "$bin" nw --epochs 1 --out "$out/res.safetensors" --plot "$out/full.png"; local rc=$?
  [[ -s $out/res.safetensors ]] && note="the file that was there is kept" || note="FAIL: the earlier file was deleted"
  rm -f "$out/full.png" "$out/res.safetensors"
  return $rc
}
row "nw: a later output fails, an existing --out is kept" 1 "full.png: .*No space left on device" -- nw_keeps_old
