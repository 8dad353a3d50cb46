# shellcheck shell=bash
# Helpers shared by tests/robustness.sh, tests/kill_resume.sh and tests/valgrind.sh (sourced).

# make_imdb DIR N_PER_CLASS_TRAIN N_PER_CLASS_TEST: a tiny aclImdb layout with deterministic
# reviews (positive ones use pleasant words, negative ones unpleasant words, so a model can learn).
make_imdb() {
  local dir=$1 ntrain=$2 ntest=$3 split label n i
  local pos=(great wonderful superb moving brilliant fun charming lovely best enjoyed)
  local neg=(awful boring dull terrible worst waste bad poor silly annoying)
  local common=(the film movie story actors plot was and a it this with of scenes)
  for split in train test; do
    n=$ntrain; [[ $split == test ]] && n=$ntest
    for label in neg pos; do
      mkdir -p "$dir/$split/$label"
      for ((i = 0; i < n; i++)); do
        local words=() k r
        for ((k = 0; k < 12; k++)); do
          r=$(( (i * 7 + k * 13 + ${#split}) % 10 ))
          if (( k % 3 == 0 )); then
            if [[ $label == pos ]]; then words+=("${pos[r]}"); else words+=("${neg[r]}"); fi
          else
            words+=("${common[(r + k) % 14]}")
          fi
        done
        local rating; [[ $label == pos ]] && rating=$((7 + i % 4)) || rating=$((1 + i % 4))
        printf '%s. <br /><br />%s!\n' "${words[*]:0:6}" "${words[*]:6}" > "$dir/$split/$label/${i}_${rating}.txt"
      done
    done
  done
}

# make_pairs DIR N: train/val/test_2016_flickr .en.gz/.fr.gz (gzip) with N/N/N line pairs.
make_pairs() {
  local dir=$1 n=$2 split i
  mkdir -p "$dir"
  for split in train val test_2016_flickr; do
    : > "$dir/$split.en"; : > "$dir/$split.fr"
    for ((i = 0; i < n; i++)); do
      local s=$(( i % 3 ))
      case $s in
        0) echo "A man is walking the dog ." >> "$dir/$split.en"; echo "Un homme promène le chien ." >> "$dir/$split.fr" ;;
        1) echo "Two women are sitting on a bench ." >> "$dir/$split.en"; echo "Deux femmes sont assises sur un banc ." >> "$dir/$split.fr" ;;
        2) echo "Children play in the park ." >> "$dir/$split.en"; echo "Des enfants jouent au parc ." >> "$dir/$split.fr" ;;
      esac
    done
    gzip -nf "$dir/$split.en" "$dir/$split.fr"
  done
}

# le64 N: N as 8 little-endian bytes (printf escapes).
le64() {
  local n=$1 out="" i
  for ((i = 0; i < 8; i++)); do out+=$(printf '\\x%02x' $(( (n >> (8 * i)) & 255 ))); done
  printf '%s' "$out"
}

# st_file PATH HEADER_JSON [DATA_ESCAPES]: a safetensors file: 8-byte header length, the header,
# then the data bytes given as printf escapes (e.g. '\x00\x00\x80\x3f' for 1.0f).
st_file() {
  local LC_ALL=C # ${#header} in bytes, whatever the header's text
  local path=$1 header=$2 data=${3:-}
  { printf "$(le64 ${#header})"; printf '%s' "$header"; printf "$data"; } > "$path"
}

# f32 X...: printf escapes of float32 little-endian values among 0, 1, -1, 0.5, nan, inf, -inf.
f32() {
  local x out=""
  for x in "$@"; do
    case $x in
      0) out+='\x00\x00\x00\x00' ;;
      1) out+='\x00\x00\x80\x3f' ;;
      -1) out+='\x00\x00\x80\xbf' ;;
      0.5) out+='\x00\x00\x00\x3f' ;;
      2) out+='\x00\x00\x00\x40' ;;
      nan) out+='\x00\x00\xc0\x7f' ;;
      inf) out+='\x00\x00\x80\x7f' ;;
      -inf) out+='\x00\x00\x80\xff' ;;
      *) echo "f32: unsupported value $x" >&2; return 1 ;;
    esac
  done
  printf '%s' "$out"
}

# st_header_len FILE: the length of a safetensors file's JSON header.
st_header_len() { od -An -tu8 -N8 "$1" | command tr -d ' '; }

# st_rewrite SRC DST SED_EXPR: DST is SRC with its JSON header edited by sed (the data bytes kept).
st_rewrite() {
  local LC_ALL=C # ${#header} in bytes: a vocabulary inside the header may hold any UTF-8
  local src=$1 dst=$2 expr=$3 n header
  n=$(st_header_len "$src")
  header=$(head -c $((8 + n)) "$src" | tail -c "$n" | sed -e "$expr")
  { printf "$(le64 ${#header})"; printf '%s' "$header"; tail -c +$((9 + n)) "$src"; } > "$dst.part" && mv "$dst.part" "$dst"
}

# st_poison SRC DST NAME: DST is SRC with the first float32 of tensor NAME set to NaN.
st_poison() {
  local src=$1 dst=$2 name=$3 n begin
  n=$(st_header_len "$src")
  begin=$(head -c $((8 + n)) "$src" | tail -c "$n" | grep -o "\"$name\":{[^}]*}" | sed -nE 's/.*"data_offsets":\[([0-9]+),.*/\1/p')
  cp "$src" "$dst"
  printf '\x00\x00\xc0\x7f' | dd of="$dst" bs=1 seek=$((8 + n + begin)) conv=notrunc 2>/dev/null
}

# attn_vocab_of CHECKPOINT KEY: the vocabulary (one token per line) a checkpoint carries as metadata
# KEY ("vocab", "vocab.src", "vocab.tgt"), or, in one written before they went inside, the file
# beside it (CHECKPOINT.vocab, .src.vocab, .tgt.vocab).
attn_vocab_of() {
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
path, key = sys.argv[1], sys.argv[2]
with open(path, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    meta = json.loads(f.read(n)).get("__metadata__", {})
if key in meta:
    sys.stdout.write(meta[key])
else:
    sys.stdout.write(open(path + {"vocab": ".vocab", "vocab.src": ".src.vocab", "vocab.tgt": ".tgt.vocab"}[key]).read())
PY
}
