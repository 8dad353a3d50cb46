# shellcheck shell=bash
# Rows of tests/robustness.sh (sourced; uses its row, $bin, $in, $out, $tiny, note) for issue 37's
# hostile round, one row or more per cause, each failing on the tree before it: attention rows
# that see no key, window bounds near INT64_MAX, paths that meet through dangling links or name
# this process's descriptors, checkpoints whose metadata or keys do not fit their tensors, and
# messages that did not name what failed.

o=$out/o.safetensors
# Runs the fused and the reference kernel on the same input (extra options after the file) and
# compares their files byte for byte: with one key per query, P is exactly 1 or the row is
# empty, so both kernels give v or 0 exactly (same program, same machine)
same_as_ref() {
  "$bin" op sdpa --in "$1" --out "$o" "${@:2}" || return
  "$bin" op sdpa --in "$1" --out "$out/ref.safetensors" --impl ref "${@:2}" || return
  cmp -s "$o" "$out/ref.safetensors" && note="the fused kernel's file is the reference kernel's" ||
    note="FAIL: the fused kernel's out differs from the reference kernel's"
  rm -f "$o" "$out/ref.safetensors"
}
# q (1, 1, 6, 2), k, v (1, 1, 1, 2): Lq 6 queries, one key
one_key='"q":{"dtype":"F32","shape":[1,1,6,2],"data_offsets":[0,48]},"k":{"dtype":"F32","shape":[1,1,1,2],"data_offsets":[48,56]},"v":{"dtype":"F32","shape":[1,1,1,2],"data_offsets":[56,64]}'
one_key_data="$(f32 1 0 0 1 1 1 -1 0 0.5 0.5 2 -1)$(f32 1 0.5)$(f32 2 -1)"
st_file "$in/one_key.safetensors" "{$one_key}" "$one_key_data"
st_file "$in/one_key_lens.safetensors" "{$one_key,\"valid_lens\":{\"dtype\":\"I64\",\"shape\":[1,6],\"data_offsets\":[64,112]}}" \
  "$one_key_data$(le64 0)$(le64 1)$(le64 0)$(le64 1)$(le64 1)$(le64 0)"
packed='"q":{"dtype":"F32","shape":[6,1,2],"data_offsets":[0,48]},"k":{"dtype":"F32","shape":[1,1,2],"data_offsets":[48,56]},"v":{"dtype":"F32","shape":[1,1,2],"data_offsets":[56,64]},"cu_seqlens_q":{"dtype":"I64","shape":[2],"data_offsets":[64,80]},"cu_seqlens_k":{"dtype":"I64","shape":[2],"data_offsets":[80,96]}'
st_file "$in/one_key_packed.safetensors" "{$packed}" "$one_key_data$(le64 0)$(le64 6)$(le64 0)$(le64 1)"
row "op sdpa: Lq 6, Lk 1, --window 0,0 (rows that see no key)" 0 "" -- same_as_ref "$in/one_key.safetensors" --window 0,0
row "op sdpa: packed, Lq 6, Lk 1, --causal (bottom-right)"     0 "" -- same_as_ref "$in/one_key_packed.safetensors" --causal
row "op sdpa: valid_lens (B, Lq) with zeros, Lk 1"             0 "" -- same_as_ref "$in/one_key_lens.safetensors"
no_window() { # a window (the argument) that hides nothing gives the output of no window
  "$bin" op sdpa --in "$in/good.safetensors" --out "$o" --window "$1" || return
  "$bin" op sdpa --in "$in/good.safetensors" --out "$out/plain.safetensors" || return
  cmp -s "$o" "$out/plain.safetensors" && note="the output of no window" || note="FAIL: not the output of no window"
  rm -f "$o" "$out/plain.safetensors"
}
row "op sdpa: --window -1,9223372036854775807"                  0 "" -- no_window -1,9223372036854775807
row "op sdpa: --window 9223372036854775807,9223372036854775807" 0 "" -- no_window 9223372036854775807,9223372036854775807
row "op sdpa: --window 99999999999999999999999,0"               2 "--window \"99999999999999999999999,0\": expected LEFT,RIGHT, each an integer from -1" "$o" -- "$bin" op sdpa --in "$in/good.safetensors" --out "$o" --window 99999999999999999999999,0
row "op sdpa: --window 1,2,3"                                   2 "--window \"1,2,3\": expected LEFT,RIGHT" "$o" -- "$bin" op sdpa --in "$in/good.safetensors" --out "$o" --window 1,2,3
row "op sdpa: --softcap 1e-40 (a denormal float)"               2 "--softcap must be in \[1.17549435e-38, 3.40282347e\+38\]" "$o" -- "$bin" op sdpa --in "$in/good.safetensors" --out "$o" --softcap 1e-40
row "op sdpa: --softcap 3.40282347e38 (FLT_MAX's 9 digits)"     0 "" -- "$bin" op sdpa --in "$in/good.safetensors" --out "$out/o2.safetensors" --softcap 3.40282347e38
rm -f "$out/o2.safetensors"
row "nw: --lr 4.9e-324 (a denormal double)"                    2 "--lr 4.9e-324: not a double" -- "$bin" nw --lr 4.9e-324 --plot none

# ---- paths that meet through dangling links, and descriptors ---------------------------------
dangling_plot() { # --plot names --out through a link to a file not written yet
  ln -sfn "$out/fit.safetensors" "$out/pic.png"
  "$bin" nw --epochs 1 --out "$out/fit.safetensors" --plot "$out/pic.png"
  local rc=$?
  rm -f "$out/pic.png" "$out/fit.safetensors"
  return $rc
}
row "nw: --plot a dangling link to --out"                      2 "--(plot|out) .*: the same file as --(out|plot)" -- dangling_plot
dangling_loss() { # --plot-loss names the checkpoint through a dangling link
  ln -sfn "$out/c.safetensors" "$out/loss.png"
  "$bin" classify train "${tiny[@]}" --data "$in/imdb" --checkpoint "$out/c.safetensors" --plot-loss "$out/loss.png"
  local rc=$?
  [[ -e $out/c.safetensors ]] && note="FAIL: a checkpoint was written"
  rm -f "$out/loss.png" "$out/c.safetensors"
  return $rc
}
row "classify train: --plot-loss a dangling link to --checkpoint" 2 "the same file as" -- dangling_loss
lock_loss() { # --plot-loss names the checkpoint's lock through a dangling link: the picture would replace the lock
  ln -sfn "$out/c.safetensors.lock" "$out/loss.png"
  "$bin" classify train "${tiny[@]}" --data "$in/imdb" --checkpoint "$out/c.safetensors" --plot-loss "$out/loss.png"
  local rc=$?
  rm -f "$out/loss.png" "$out"/c.safetensors*
  return $rc
}
row "classify train: --plot-loss a dangling link to the lock"  2 "the same file as \(the lock of --checkpoint\)" -- lock_loss
linked_writers() { # one run trains c through a dangling link, another c itself: one lock, the second refused
  local c=$out/target.safetensors
  ln -sfn "$c" "$out/link.safetensors"
  "$bin" classify train "${tiny[@]}" --epochs 40 --data "$in/imdb" --checkpoint "$out/link.safetensors" > "$out/first.log" 2>&1 &
  local first=$! i
  for ((i = 0; i < 600; i++)); do compgen -G "$out/*.lock" >/dev/null && break; sleep 0.01; done
  "$bin" classify train "${tiny[@]}" --epochs 1 --data "$in/imdb" --checkpoint "$c"
  local rc=$?
  wait $first || note="FAIL: the first run failed"
  rm -f "$c" "$c".* "$out/link.safetensors" "$out/link.safetensors".* "$out/first.log"
  return $rc
}
row "classify train: two runs, one through a dangling link"    1 "another run \(pid [0-9]+\) is training into this checkpoint \(it holds .*target.safetensors.lock\)" -- linked_writers
thread_self_fd() { # a log opened for append, named through /proc/thread-self/fd: appended to, never replaced
  printf 'the log so far\n' > "$out/log"
  local inode
  inode=$(stat -c %i "$out/log")
  (exec 7>>"$out/log" && exec "$bin" nw --epochs 1 --plot none --out /proc/thread-self/fd/7)
  local rc=$?
  if [[ $(head -c 14 "$out/log" | command tr -d '\0') != "the log so far" || $(stat -c %i "$out/log") != "$inode" ]]; then
    note="FAIL: the log was replaced"
  elif compgen -G "$out/*deleted*" >/dev/null; then
    note="FAIL: a file named after the descriptor's link was made"
  else
    note="appended: $(stat -c %s "$out/log") bytes, the same file"
  fi
  rm -f "$out/log"
  return $rc
}
row "nw: --out /proc/thread-self/fd/N (a log opened for append)" 0 "" -- thread_self_fd
deleted_fd() { # /proc/thread-self/fd/N of a deleted file is that descriptor: no "<name> (deleted)" appears
  (exec 7>"$out/gone" && rm "$out/gone" && exec "$bin" nw --epochs 1 --plot none --out "/proc/thread-self/fd/7")
  local rc=$?
  compgen -G "$out/gone*" >/dev/null && note="FAIL: $(ls "$out" | grep gone)" || note="nothing named after the link"
  rm -f "$out"/gone*
  return $rc
}
row "nw: --out a descriptor of a deleted file"                 0 "" -- deleted_fd

# ---- checkpoints whose metadata or keys do not fit ------------------------------------------
additive_hidden() { # the checkpoint keeps --additive-hidden: the model evaluates
  "$bin" classify train --epochs 1 --batch-size 4 --max-len 32 --embed-dim 16 --hidden 16 --threads 1 \
    --attention additive --additive-hidden 24 --data "$in/imdb" \
    --checkpoint "$out/add.safetensors" >/dev/null || return
  "$bin" classify eval --data "$in/imdb" --checkpoint "$out/add.safetensors" >/dev/null
  local rc=$?
  rm -f "$out/add.safetensors"
  return $rc
}
row "classify: --additive-hidden 24, then eval"                0 "" -- additive_hidden
st_file "$in/dup_key.safetensors" '{"q":{"dtype":"F32","dtype":"BOOL","shape":[1,1,2,2],"data_offsets":[0,16]},"k":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[16,32]},"v":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[32,48]}}' "$ones12"
row "safetensors: \"dtype\" twice in one entry"                1 "dup_key.safetensors: tensor \"q\": key \"dtype\" appears more than once" "$o" -- "$bin" op sdpa --in "$in/dup_key.safetensors" --out "$o"
# st_meta_set SRC DST KEY VALUE: SRC with its metadata KEY (a key it has) set to VALUE
st_meta_set() {
  local LC_ALL=C n header
  n=$(od -An -tu8 -N8 "$1" | command tr -d ' ')
  header=$(head -c $((8 + n)) "$1" | tail -c "$n")
  header=$(printf '%s' "$header" | sed -E "s/\"$3\":\"[^\"]*\"/\"$3\":\"$4\"/")
  header="${header%"${header##*[! ]}"}" # the old padding
  while (((8 + ${#header}) % 8)); do header+=" "; done
  { printf '%b' "$(le64 ${#header})"; printf '%s' "$header"; tail -c +$((9 + n)) "$1"; } > "$2"
}
"$bin" classify train "${tiny[@]}" --epochs 1 --data "$in/imdb" --checkpoint "$in/cls.safetensors" >/dev/null ||
  echo "edges.sh: the classifier for the metadata rows did not train" >&2
st_meta_set "$in/cls.safetensors" "$in/cls_wide.safetensors" embed_dim 4096
st_meta_set "$in/cls.safetensors" "$in/cls_deep.safetensors" num_blocks 64
bounded() { # the memory a run may take: a run past it fails where it allocates (ASan: allocations past 256 MB).
  # One OpenMP thread: the address space then holds one thread's stack, whatever the machine's core count
  local limit_kb=$1
  shift
  if ldd "$bin" | grep -q libasan; then # its note of each refused allocation is no report of ours
    OMP_NUM_THREADS=1 ASAN_OPTIONS="$ASAN_OPTIONS:max_allocation_size_mb=256" "$@" 2>"$out/bounded.err"
    local rc=$?
    grep -v "WARNING: AddressSanitizer failed to allocate" "$out/bounded.err" >&2
    rm -f "$out/bounded.err"
    return $rc
  else
    (ulimit -v "$limit_kb" && OMP_NUM_THREADS=1 "$@")
  fi
}
row "classify eval: metadata embed_dim 4096 over 16-wide tensors" 1 "cls_wide.safetensors: its metadata describes a larger model than its tensors hold: .*embedding.weight" -- \
  bounded 400000 "$bin" classify eval --data "$in/imdb" --checkpoint "$in/cls_wide.safetensors"
row "classify eval: metadata num_blocks 64, no block tensors"  1 "cls_deep.safetensors: (its metadata describes a larger model|.*missing)" -- \
  bounded 400000 "$bin" classify eval --data "$in/imdb" --checkpoint "$in/cls_deep.safetensors"
tr_small=(--d-model 16 --heads 2 --ffn 16 --layers 1 --epochs 1 --batch-size 4 --min-freq 1 --threads 1 --data "$in/pairs")
for rope in "" 10000; do # sinusoidal, rotary
  "$bin" translate train "${tr_small[@]}" ${rope:+--rope-base $rope} --checkpoint "$in/tr_${rope:-0}.safetensors" \
    >/dev/null || echo "edges.sh: the translator with --rope-base ${rope:-none} did not train" >&2
done
row "translate eval: --average a rotary and a sinusoidal model" 1 "--average: .*tr_10000.safetensors holds a different model than .*tr_0.safetensors" -- \
  "$bin" translate eval --data "$in/pairs" --checkpoint "$in/tr_0.safetensors" --average "$in/tr_10000.safetensors"
resume_other() { # a classifier checkpoint to translate --resume: named as what it is
  cp "$in/cls.safetensors" "$out/cls.safetensors"
  "$bin" translate train "${tr_small[@]}" --resume --checkpoint "$out/cls.safetensors"
  local rc=$?
  cmp -s "$in/cls.safetensors" "$out/cls.safetensors" || note="FAIL: the checkpoint changed"
  rm -f "$out/cls.safetensors"
  return $rc
}
row "translate train --resume: a classifier checkpoint"        1 "cls.safetensors is not a translation checkpoint: its metadata says model=attn-classifier" -- resume_other
mkdir -p "$in/pairs_bomb" && cp "$in"/pairs/*.gz "$in/pairs_bomb/"
head -c 600M /dev/zero | command tr '\0' 'a' | gzip -1 > "$in/pairs_bomb/train.en.gz" # 600 KB
row "translate train: a gzip file of 600 MB of text, memory bounded" 1 "--data .*pairs_bomb: .*train.en.gz: its text passes [0-9]+ bytes \([0-9]+ on disk\) and there is no memory for more" -- \
  bounded 500000 "$bin" translate train "${tr_small[@]}" --data "$in/pairs_bomb" --checkpoint "$out/bomb.safetensors"
rm -rf "$in/pairs_bomb"
