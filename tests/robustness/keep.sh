# shellcheck shell=bash
# Rows of tests/robustness.sh (sourced; uses its row, $bin, $in, $out, $tiny, note) for issue 26:
# nothing of the user's is ever lost - inputs, earlier results, the process itself. One group per
# class; every row failed on the tree before it (checked against that tree's build).
#   1. an output never names an input of its run (the same file, or inside an input folder);
#   2. a checkpoint and its vocabularies are one unit, and two writers of one checkpoint are refused;
#   3. temporary files are recognised by more than their name;
#   4. a file is read once into memory we own (a truncated file cannot fault us);
#   5. the library checks ctx ownership and thread counts (tests/test_ownership.c, beside $bin);
#   6. standard input: read errors are errors, a NUL byte is refused alike;
#   7. --resume refuses options that would break its promise;
#   8. memory per input proportional to its size (a 4 GB address space trains the mini set);
#   9. every option checked against the data before the first step.

probe=$(dirname "$bin")/test_ownership # the library's rows: a program on the public header alone
rel=${ATTN_RELEASE_BIN:-$(dirname "$bin")/../build/attn} # the row under an address-space limit: ASan cannot run there

# ---- 1. outputs are never inputs ---------------------------------------------------------------
over_review() { # --checkpoint one of the reviews --data reads
  rm -rf "$in/imdb_k1" && cp -r "$in/imdb" "$in/imdb_k1"
  local review=$in/imdb_k1/train/pos/0_7.txt before
  before=$(sha256sum < "$review")
  "$bin" classify train "${tiny[@]}" --epochs 1 --data "$in/imdb_k1" --checkpoint "$review"
  local rc=$?
  [[ $(sha256sum < "$review") == "$before" ]] && note="the review is untouched" || note="FAIL: the review was replaced"
  return $rc
}
row "classify train: --checkpoint a review of --data" 2 "--checkpoint .*0_7.txt: inside the folder --data .*imdb_k1, which this run reads" -- over_review
over_pairs() { # --checkpoint one of the files of --data
  rm -rf "$in/pairs_k1" && cp -r "$in/pairs" "$in/pairs_k1"
  local before
  before=$(sha256sum < "$in/pairs_k1/train.en.gz")
  "$bin" translate train --d-model 16 --heads 2 --ffn 16 --layers 1 --epochs 1 --batch-size 4 --min-freq 1 --threads 1 \
    --beam 1 --data "$in/pairs_k1" --checkpoint "$in/pairs_k1/train.en.gz"
  local rc=$?
  [[ $(sha256sum < "$in/pairs_k1/train.en.gz") == "$before" ]] && note="train.en.gz is untouched" ||
    note="FAIL: train.en.gz was replaced"
  return $rc
}
row "translate train: --checkpoint a file of --data" 2 "--checkpoint .*train.en.gz: inside the folder --data" -- over_pairs
into_data() { # a new file inside --data, through a symlink to the folder
  rm -rf "$in/imdb_k2" && cp -r "$in/imdb" "$in/imdb_k2" && ln -sfn "$in/imdb_k2/test/neg" "$out/door"
  "$bin" classify train "${tiny[@]}" --epochs 1 --data "$in/imdb_k2" --checkpoint "$out/door/5_1.txt"
  local rc=$?
  [[ -e $in/imdb_k2/test/neg/5_1.txt ]] && note="FAIL: a new review was written into --data" || note="nothing written"
  rm -f "$out/door"
  return $rc
}
row "classify train: --checkpoint inside --data (through a link)" 2 "--checkpoint .*door/5_1.txt: inside the folder --data" -- into_data

# ---- 2. a checkpoint and its vocabularies are one unit; one writer at a time -------------------
two_writers() { # two runs into one checkpoint: the second is refused, the first's result whole
  local c=$out/shared.safetensors
  "$bin" classify train "${tiny[@]}" --epochs 40 --data "$in/imdb" --checkpoint "$c" > "$out/first.log" 2>&1 &
  local first=$! i
  for ((i = 0; i < 600; i++)); do [[ -e $c.lock ]] && grep -q "^model:" "$out/first.log" && break; sleep 0.05; done
  "$bin" classify train "${tiny[@]}" --epochs 1 --data "$in/imdb_other2" --checkpoint "$c"
  local rc=$?
  wait $first
  local first_rc=$?
  if ((first_rc != 0)); then
    note="FAIL: the first run failed ($first_rc)"
  elif ! "$bin" classify eval --data "$in/imdb" --checkpoint "$c" > "$out/eval.log" 2>&1; then
    note="FAIL: the first run's checkpoint does not load"
  elif [[ $(grep -o "test accuracy: [0-9.]*%" "$out/eval.log") != "$(grep -o "test accuracy: [0-9.]*%" "$out/first.log")" ]]; then
    note="FAIL: eval gives $(grep -o "test accuracy: [0-9.]*%" "$out/eval.log"), the run printed $(grep -o "test accuracy: [0-9.]*%" "$out/first.log")"
  else
    note="the first run's checkpoint is whole: $(grep -o "test accuracy: [0-9.]*%" "$out/eval.log")"
  fi
  [[ -e $c.lock ]] && note="FAIL: the lock file is left"
  rm -f "$c" "$c".* "$out/first.log" "$out/eval.log"
  return $rc
}
rm -rf "$in/imdb_other2" && cp -r "$in/imdb" "$in/imdb_other2" && grep -rl "film" "$in/imdb_other2" | xargs sed -i 's/film/picture/g'
row "classify train: two runs into one checkpoint" 1 "shared.safetensors: another run \(pid [0-9]+\) is training into this checkpoint" -- two_writers
killed_lock() { # a run killed between creating its lock and writing its line leaves it empty
  local c=$out/killed.safetensors
  : > "$c.lock"
  "$bin" classify train "${tiny[@]}" --epochs 1 --data "$in/imdb" --checkpoint "$c"
  local rc=$?
  [[ -e $c.lock ]] && note="FAIL: the lock file is left" || note="trained; the lock is gone"
  rm -f "$c" "$c".*
  return $rc
}
row "classify train: an empty lock file left by a killed run" 0 "" -- killed_lock
vocab_path_blocked() { # what was <checkpoint>.vocab is a folder: the checkpoint alone is the model
  mkdir -p "$out/u.safetensors.vocab"
  "$bin" classify train "${tiny[@]}" --epochs 1 --data "$in/imdb" --checkpoint "$out/u.safetensors" > "$out/u.log"
  local rc=$?
  if "$bin" classify eval --data "$in/imdb" --checkpoint "$out/u.safetensors" >/dev/null 2>&1; then
    note="written whole; it loads"
  else
    note="FAIL: no checkpoint that loads"
  fi
  rm -rf "$out/u.safetensors" "$out/u.safetensors.vocab" "$out/u.log"
  return $rc
}
row "classify train: <checkpoint>.vocab cannot be written" 0 "" -- vocab_path_blocked
copied_alone() { # a checkpoint copied without the files beside it is still its own model
  "$bin" classify train "${tiny[@]}" --epochs 1 --data "$in/imdb" --checkpoint "$out/a.safetensors" >/dev/null 2>&1
  "$bin" classify train "${tiny[@]}" --epochs 1 --data "$in/imdb_other2" --checkpoint "$out/b.safetensors" >/dev/null 2>&1
  local own
  own=$("$bin" classify predict --checkpoint "$out/b.safetensors" "a fine picture" 2>/dev/null | tail -1)
  cp "$out/b.safetensors" "$out/a.safetensors" # as a second writer or a user copying the model would
  local got
  got=$("$bin" classify predict --checkpoint "$out/a.safetensors" "a fine picture" | tail -1)
  local rc=${PIPESTATUS[0]}
  [[ -n $own && $got == "$own" ]] && note="the same answer as the original: $got" ||
    note="FAIL: \"$got\" where the model answers \"$own\""
  rm -f "$out"/a.safetensors* "$out"/b.safetensors*
  return $rc
}
row "classify predict: a checkpoint copied alone" 0 "" -- copied_alone

# ---- 3. temporary files are recognised by more than their name ---------------------------------
users_tmp() { # a user's file named like an old temporary file, and our own dead writer's
  echo "the user's notes" > "$out/o.safetensors.tmp.2147480000"
  : > "$out/o.safetensors.tmp.2147480001.0123456789abcdef"
  "$bin" op sdpa --in "$in/good.safetensors" --out "$out/o.safetensors" || return
  if [[ $(cat "$out/o.safetensors.tmp.2147480000" 2>/dev/null) != "the user's notes" ]]; then
    note="FAIL: the user's file was removed"
  elif [[ -e $out/o.safetensors.tmp.2147480001.0123456789abcdef ]]; then
    note="FAIL: the dead writer's temporary file is still there"
  else
    note="the user's file kept, the dead writer's temporary file removed"
  fi
  rm -f "$out"/o.safetensors*
}
row "op --out: a user's <out>.tmp.<digits> file" 0 "" -- users_tmp

# ---- 4. a file is read once into memory we own --------------------------------------------------
truncated_while_read() { # another process truncates a 200 MB input while attn reads it
  local f=$in/nw_200mb.safetensors n=25000000
  st_file "$f" "{\"x_train\":{\"dtype\":\"F32\",\"shape\":[$n],\"data_offsets\":[0,$((4 * n))]},\"y_train\":{\"dtype\":\"F32\",\"shape\":[$n],\"data_offsets\":[$((4 * n)),$((8 * n))]},\"x_test\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[$((8 * n)),$((8 * n + 8))]},\"y_true\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[$((8 * n + 8)),$((8 * n + 16))]}}"
  head -c $((8 * n + 16)) /dev/zero >> "$f"
  "$bin" nw --epochs 1 --plot none --data "$f" --out "$out/nw.safetensors" &
  local pid=$! i
  for ((i = 0; i < 20000; i++)); do # until it has the file open or mapped
    grep -q nw_200mb "/proc/$pid/maps" 2>/dev/null && break
    ls -l "/proc/$pid/fd" 2>/dev/null | grep -q nw_200mb && break
    kill -0 $pid 2>/dev/null || break
  done
  truncate -s 4096 "$f"
  wait $pid
  local rc=$?
  rm -f "$f"
  ((rc < 128)) && note="no signal: exit $rc"
  return $((rc == 1 ? 0 : rc == 0 ? 0 : rc))
}
row "nw --data: a 200 MB file truncated while it is read" 0 "" -- truncated_while_read

# ---- 5. the library: ctx ownership, thread counts, registration ---------------------------------
api() { [[ -x $probe ]] || { echo "no $probe (build the tests)" >&2; return 3; }; "$probe" "$@"; }
row "api: a tensor of another ctx in an op (grad on)"      0 "" -- api foreign_op
row "api: attn_backward on a loss of another ctx"          0 "" -- api foreign_backward
row "api: 100000 parameters registered (linear)"           0 "" -- timeout 120 "$probe" registration
few_threads() { # a process limit of 40 threads: --threads 200 refused, never libgomp's exit
  local dir=$out/nobody
  mkdir -p "$dir" && cp -r "$in/imdb" "$dir/" && chmod -R a+rwX "$dir" && chmod a+x "$work" "$out"
  local runner=(bash -c)
  if [[ $(id -u) == 0 ]]; then runner=(setpriv --reuid 65534 --regid 65534 --clear-groups bash -c); fi
  "${runner[@]}" "ulimit -u 40 && exec \"\$0\" classify train --epochs 1 --batch-size 64 --max-len 128 --embed-dim 128 \
    --heads 2 --hidden 16 --threads 200 --max-steps 1 --data \"\$1/imdb\" --checkpoint \"\$1/ck.safetensors\"" "$bin" "$dir"
  local rc=$?
  chmod go-rwx "$work"
  [[ -e $dir/ck.safetensors ]] && note="FAIL: a checkpoint was written"
  rm -rf "$dir"
  return $rc
}
if [[ $(id -u) != 0 ]] || command -v setpriv >/dev/null; then
  row "classify train --threads 200 under a limit of 40 threads" 1 "--threads 200: .*200 threads cannot run here: only [0-9]+ could start" -- few_threads
fi

# ---- 6. standard input --------------------------------------------------------------------------
"$bin" classify train "${tiny[@]}" --epochs 1 --data "$in/imdb" --checkpoint "$in/k_cls.safetensors" >/dev/null 2>&1
"$bin" translate train --d-model 16 --heads 2 --ffn 16 --layers 1 --epochs 1 --batch-size 4 --min-freq 1 --threads 1 \
  --beam 1 --data "$in/pairs" --checkpoint "$in/k_tr.safetensors" >/dev/null 2>&1
row "classify predict: standard input cannot be read (a folder)" 1 "standard input: cannot read line 1: Is a directory" -- \
  bash -c '"$1" classify predict --checkpoint "$2" < /' _ "$bin" "$in/k_cls.safetensors"
row "translate translate: a NUL byte on standard input" 1 "standard input, line 1: a NUL byte at byte offset 7; expected text" "$out/x.png" -- \
  bash -c 'printf "A zebra\0 quokka .\n" | "$1" translate translate --checkpoint "$2" --out "$3"' _ "$bin" "$in/k_tr.safetensors" "$out/x.png"

# ---- 7. --resume keeps its promise ----------------------------------------------------------------
resume_with() { # OPTIONS...: --resume of k_cls with other options
  cp "$in/k_cls.safetensors" "$out/r7.safetensors"
  "$bin" classify train "${tiny[@]}" --epochs 2 --data "$in/imdb" --checkpoint "$out/r7.safetensors" --resume "$@"
  local rc=$?
  cmp -s "$in/k_cls.safetensors" "$out/r7.safetensors" || note="FAIL: the checkpoint changed"
  rm -f "$out"/r7.safetensors*
  return $rc
}
row "classify --resume with another --seed and --lr" 2 "r7.safetensors was trained with --seed 0, --lr 0.001; these options give --seed 5, --lr 0.002" -- resume_with --seed 5 --lr 0.002
row "classify --resume with another --dropout" 2 "was trained with --dropout 0.5; these options give --dropout 0.1" -- resume_with --dropout 0.1

# ---- 8. memory per input proportional to its size -------------------------------------------------
mini_in_4gb() { # the shipped mini set (3,500 reviews) under a 4 GB address space, a release build
  [[ -x $rel ]] || { note="FAIL: no release build at $rel"; return 0; }
  (ulimit -v 4000000 && exec "$rel" classify train --epochs 1 --max-steps 2 --batch-size 8 --embed-dim 16 --heads 2 \
    --hidden 16 --threads 1 --checkpoint "$out/mini.safetensors")
  local rc=$?
  [[ -s $out/mini.safetensors ]] && note="trained (${rel#$root/})" || note="FAIL: no checkpoint (${rel#$root/})"
  rm -f "$out"/mini.safetensors*
  return $rc
}
row "classify train: the mini set in a 4 GB address space" 0 "" -- mini_in_4gb

# ---- 9. every option checked against the data before the first step ------------------------------
row "translate train: --beam above the target vocabulary" 2 "--beam 40 is more than the [0-9]+ tokens of the target vocabulary" "$out/b.safetensors" -- \
  "$bin" translate train --d-model 16 --heads 2 --ffn 16 --layers 1 --epochs 1 --batch-size 4 --min-freq 1 --threads 1 \
  --beam 40 --data "$in/pairs" --checkpoint "$out/b.safetensors"
row "translate train: --heads and --ffn with bahdanau" 2 "--heads and --ffn: the Bahdanau GRU has no attention heads or feed-forward layers" "$out/b.safetensors" -- \
  "$bin" translate train --model bahdanau --d-model 16 --heads 2 --ffn 16 --layers 1 --epochs 1 --batch-size 4 --min-freq 1 \
  --threads 1 --data "$in/pairs" --checkpoint "$out/b.safetensors"
row "classify train: --heads with linear attention" 2 "--heads: linear attention without --blocks has no heads" "$out/b.safetensors" -- \
  "$bin" classify train "${tiny[@]}" --attention linear --data "$in/imdb" --checkpoint "$out/b.safetensors"
wide=$(printf '0.5 %.0s' {1..16384})
st_file "$in/wide.safetensors" '{"w":{"dtype":"F32","shape":[1,16384],"data_offsets":[0,65536]}}' "$(f32 $wide)"
row "plot: a matrix too wide for any picture" 1 "1 x 16384 cells, .*which no picture of at most 16384 pixels a side holds" "$out/w.png" -- \
  "$bin" plot heatmap --in "$in/wide.safetensors" --tensor w --out "$out/w.png"
huge_constant() { # every value 3e38: one colour, not the grey of NaN
  python3 -c 'import struct, sys
h = b"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}"
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + struct.pack("<4f", *[3e38] * 4))' "$in/huge.safetensors"
  "$bin" plot heatmap --in "$in/huge.safetensors" --tensor w --out "$out/huge.png" || return
  local grey
  grey=$(python3 -c 'import sys; sys.path.insert(0, "tests"); from png_same import decode
w, h, rows, bpp = decode(sys.argv[1])
print(sum(1 for r in rows for x in range(w) if r[x * bpp] == r[x * bpp + 1] == r[x * bpp + 2] and 100 <= r[x * bpp] <= 200))' "$out/huge.png")
  ((grey < 1000)) && note="drawn in one colour ($grey grey pixels: text)" || note="FAIL: $grey grey pixels: drawn as NaN"
  rm -f "$out/huge.png"
}
row "plot: a constant matrix of 3e38" 0 "" -- huge_constant
python3 -c 'import struct, sys
h = b"{\"q\":{\"dtype\":\"F32\",\"shape\":[1,1,2,2],\"data_offsets\":[0,16]},\"k\":{\"dtype\":\"F32\",\"shape\":[1,1,2,2],\"data_offsets\":[16,32]},\"v\":{\"dtype\":\"F32\",\"shape\":[1,1,2,2],\"data_offsets\":[32,48]},\"attn_mask\":{\"dtype\":\"F64\",\"shape\":[2,2],\"data_offsets\":[48,80]}}"
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + struct.pack("<12f", *[1, 0, 0, 1] * 3) + struct.pack("<4d", 0, -1e300, 0, 0))' "$in/mask_f64.safetensors"
row "op sdpa: an F64 mask value beyond float range" 1 "tensor \"attn_mask\" \(F64\) has -1e\+300 at index \(0, 1\), beyond float32's range" "$out/o.safetensors" -- \
  "$bin" op sdpa --in "$in/mask_f64.safetensors" --out "$out/o.safetensors"
no_unk() { # a checkpoint of an older attn, its vocabulary beside it, without <unk>
  st_rewrite "$in/k_cls.safetensors" "$out/old.safetensors" 's/,"vocab":"[^"]*"//'
  attn_vocab_of "$in/k_cls.safetensors" vocab | sed 's/^<unk>$/<unq>/' > "$out/old.safetensors.vocab"
  "$bin" classify eval --data "$in/imdb" --checkpoint "$out/old.safetensors"
  local rc=$?
  rm -f "$out"/old.safetensors*
  return $rc
}
row "classify eval: a vocabulary without <unk>" 1 "old.safetensors: its vocabulary has no <unk>; expected the specials <unk>, <pad> first" -- no_unk

# ---- the fresh hostile pass: what it found, fixed ---------------------------------------------------
row "classify train: --checkpoint --resume (an option as a value)" 2 "option --checkpoint needs a value, got the option --resume" "$out/--resume" -- \
  bash -c 'cd "$1" && shift && "$@"' _ "$out" "$bin" classify train "${tiny[@]}" --data "$in/imdb" --checkpoint --resume
notes_kept() { # --checkpoint names a file that is not a checkpoint: never replaced
  echo "my notes" > "$out/notes.txt"
  "$bin" classify train "${tiny[@]}" --data "$in/imdb" --checkpoint "$out/notes.txt"
  local rc=$?
  [[ $(cat "$out/notes.txt") == "my notes" ]] && note="the file is kept" || note="FAIL: the file was replaced"
  rm -f "$out/notes.txt"
  return $rc
}
row "classify train: --checkpoint a file that is not a checkpoint" 2 "notes.txt: the file there is not an attn checkpoint, and training would replace it" -- notes_kept
epoch_notes_kept() { # --keep-epochs would write CHECKPOINT.epoch1 over a user's file, then remove it
  echo "my notes" > "$out/kk.safetensors.epoch1"
  "$bin" translate train --d-model 16 --heads 2 --ffn 16 --layers 1 --epochs 2 --batch-size 4 --min-freq 1 --threads 1 \
    --beam 1 --keep-epochs 1 --data "$in/pairs" --checkpoint "$out/kk.safetensors"
  local rc=$?
  [[ $(cat "$out/kk.safetensors.epoch1" 2>/dev/null) == "my notes" ]] && note="the file is kept" || note="FAIL: the file is gone"
  rm -f "$out"/kk.safetensors*
  return $rc
}
row "translate train --keep-epochs: a user's CHECKPOINT.epoch1" 2 "--keep-epochs .*kk.safetensors.epoch1: the file there is not an attn checkpoint" -- epoch_notes_kept
row "tour --out-dir inside --data" 2 "--out-dir .*imdb/figures: inside the folder --data" "$in/imdb/figures" -- \
  "$bin" tour 002/6.1 --data "$in/imdb" --out-dir "$in/imdb/figures"
row "tour 002/6.1 on fewer reviews than its batch" 1 "002/6.1: 20 training reviews; this step shows a batch of 32" -- \
  "$bin" tour 002/6.1 --data "$in/imdb" --out-dir "$out"
resume_nan_lr() { # a damaged run option: the file's fault (exit 1), not the options' (2)
  st_rewrite "$in/k_cls.safetensors" "$out/n.safetensors" 's/"run.lr":"[^"]*"/"run.lr":"nan"/'
  "$bin" classify train "${tiny[@]}" --epochs 2 --data "$in/imdb" --checkpoint "$out/n.safetensors" --resume
  local rc=$?
  rm -f "$out"/n.safetensors*
  return $rc
}
row "classify --resume: metadata run.lr = nan" 1 "metadata run.lr is \"nan\", which no training command writes" -- resume_nan_lr
python3 -c 'import struct, sys
h = b"{\"__metadata__\":{\"note\":\"ab\\u0000cd\"},\"q\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}"
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + struct.pack("<f", 1))' "$in/nul_meta.safetensors"
row "safetensors: \\u0000 inside a metadata value" 1 "nul_meta.safetensors: the header holds \\\\u0000 \(a NUL character\)" "$out/x.png" -- \
  "$bin" plot heatmap --in "$in/nul_meta.safetensors" --tensor q --out "$out/x.png"
python3 -c 'import struct, sys
h = b"{\"w\":{\"dtype\":\"F32\",\"shape\":[300,2,2],\"data_offsets\":[0,4800]}}"
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + bytes(4800))' "$in/tall_grid.safetensors"
wide_grid() { # 300 panels side by side: the cells shrink to fit, as the first check promised
  "$bin" plot heatmap --in "$in/tall_grid.safetensors" --tensor w --grid --out "$out/g.png" || return
  [[ -s $out/g.png ]] && note="drawn" || note="FAIL: no picture"
  rm -f "$out/g.png"
}
row "plot --grid of 300 panels (the canvas refused it)" 0 "" -- wide_grid
