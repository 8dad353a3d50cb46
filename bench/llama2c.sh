#!/usr/bin/env bash
# attn beside llama2.c (its run.c, built here from the checkout you name; nothing of it is kept):
#   check  the two programs as each other's oracle, in both directions:
#          1. a llama-style model trained by attn (or CKPT=...), exported with its tokenizer, decoded
#             greedily by run.c (-t 0, the whole context) and by attn lm generate --greedy: the same
#             text for every prompt (attn is given run.c's dummy space before the prompt, and run.c
#             drops it after BOS); and the same ids (attn --ids against a driver that calls run.c's own
#             encode, forward and argmax);
#          2. a model of llama2.c's own model.py with random weights written by its export.py (version
#             0 and 1, needs python3-torch), with llama2.c's tokenizer.bin, imported by attn lm import:
#             the same ids as run.c for every prompt, and exported back: version 1 byte for byte;
#          3. the tokenizer: run.c's encode against attn's (generate --ids --max-new-tokens 0) on 300
#             lines of the shipped reviews (their first 200 bytes, within the context), with
#             llama2.c's tokenizer.bin and with attn's own.
#   speed  decoding at batch 1 over the whole context, greedy: llama2.c's OpenMP build (its Makefile's
#          runomp flags: -Ofast -fopenmp -march=native) and attn (bench_lm --llama2c), both at 2
#          threads, in turns, ROUNDS each, medians; on the exported model of check 1 (CKPT) and on a
#          larger one of the same shape as bench/compare_lm.sh's (6 layers, width 384, vocab 4096).
# Prints every result; writes bench/results/llama2c_<time>.jsonl for speed.
#   LLAMA2C_DIR=/path/to/llama2.c bash bench/llama2c.sh check|speed    [CKPT=lm.safetensors] [ROUNDS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-check}
[[ -n ${LLAMA2C_DIR:-} && -f $LLAMA2C_DIR/run.c ]] || { echo "llama2c.sh: set LLAMA2C_DIR to a llama2.c checkout (its run.c)" >&2; exit 2; }
[[ $what == check || $what == speed ]] || { echo "llama2c.sh: check or speed, not $what" >&2; exit 2; }
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF >/dev/null && cmake --build build -j"$(nproc)" --target attn_cli bench_lm >/dev/null
attn=$PWD/build/attn
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run.c as its Makefile builds it ("make run"), and a driver of ours that prints the ids of a greedy
# decoding by run.c's own functions (TESTING leaves run.c's main out)
gcc -O3 -o "$work/run" "$LLAMA2C_DIR/run.c" -lm
cat >"$work/greedy_ids.c" <<'EOF'
#define TESTING
#include "run.c"
/* model tokenizer prompt: the prompt's ids after BOS, then each greedy one, until BOS or seq_len */
int main(int argc, char **argv)
{
    Transformer t;
    Tokenizer tok;
    if (argc < 4) return 2;
    build_transformer(&t, argv[1]);
    build_tokenizer(&tok, argv[2], t.config.vocab_size);
    int *ids = malloc(sizeof(int) * (strlen(argv[3]) + 3)), n, token, next, pos = 0;
    encode(&tok, argv[3], 1, 0, ids, &n);
    for (int i = 1; i < n; i++) printf("%s%d", i > 1 ? " " : "", ids[i]);
    for (token = ids[0]; pos < t.config.seq_len; token = next) {
        float *logits = forward(&t, token, pos);
        next = pos < n - 1 ? ids[pos + 1] : sample_argmax(logits, t.config.vocab_size);
        if (++pos >= n && next != 1) printf(" %d", next);
        if (next == 1) break;
    }
    printf("\n");
    return 0;
}
EOF
gcc -O3 -I"$LLAMA2C_DIR" -o "$work/greedy_ids" "$work/greedy_ids.c" -lm

prompts=("This movie" "The acting was" "I have never seen" "Once upon a time" "What a waste of" "The best")

same=0 total=0
compare() { # label, file a, file b
  total=$((total + 1))
  if cmp -s "$2" "$3"; then same=$((same + 1)); else echo "  differ: $1 ($(cmp "$2" "$3" 2>&1 | head -1))"; fi
}

attn_model() { # the attn checkpoint of check 1 (CKPT, or trained here for 3 minutes)
  if [[ -n ${CKPT:-} ]]; then echo "$CKPT"; return; fi
  "$attn" lm train --style llama --context 256 --d-model 192 --layers 4 --heads 6 --kv-heads 2 --untied \
    --budget-min 3 --checkpoint "$work/lm.safetensors" >"$work/train.log" 2>&1
  echo "$work/lm.safetensors"
}

if [[ $what == check ]]; then
  ck=$(attn_model)
  "$attn" lm export --checkpoint "$ck" --model-out "$work/model.bin" --tokenizer-out "$work/tok.bin" >/dev/null
  echo "== 1. attn's model in run.c ($ck)"
  for p in "${prompts[@]}"; do
    "$work/run" "$work/model.bin" -z "$work/tok.bin" -t 0 -n 0 -i "$p" 2>/dev/null >"$work/run.txt"
    "$attn" lm generate --checkpoint "$ck" --greedy --max-new-tokens 100000 " $p" | sed '1s/^ //' >"$work/attn.txt"
    compare "text of \"$p\"" "$work/run.txt" "$work/attn.txt"
    echo "  \"$p\": $(wc -c <"$work/attn.txt") bytes: $(head -c 120 "$work/attn.txt" | tr '\n' ' ')"
  done
  "$attn" lm import --model-in "$work/model.bin" --tokenizer-in "$work/tok.bin" --checkpoint "$work/back.safetensors" >/dev/null
  for p in "${prompts[@]}"; do
    "$work/greedy_ids" "$work/model.bin" "$work/tok.bin" "$p" >"$work/run.ids"
    "$attn" lm generate --checkpoint "$work/back.safetensors" --greedy --ids --max-new-tokens 100000 "$p" >"$work/attn.ids"
    compare "ids of \"$p\" ($(wc -w <"$work/run.ids") ids)" "$work/run.ids" "$work/attn.ids"
  done
  echo "== 2. llama2.c's export.py in attn"
  if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    (cd "$work" && PYTHONPATH="$LLAMA2C_DIR" /usr/bin/python3 - >/dev/null 2>&1) <<'EOF'
import torch
from model import ModelArgs, Transformer
from export import legacy_export, version1_export
torch.manual_seed(0)
m = Transformer(ModelArgs(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=32000, multiple_of=32,
                          max_seq_len=256, dropout=0.0))
with torch.no_grad():  # weights larger than the init's, norms not all one: the greedy choices far apart
    for p in m.parameters():
        p.mul_(8.0) if p.dim() > 1 else p.add_(torch.randn_like(p) * 0.1)
legacy_export(m, "rand_v0.bin")
version1_export(m, "rand_v1.bin")
EOF
    for v in 0 1; do
      "$attn" lm import --model-in "$work/rand_v$v.bin" --tokenizer-in "$LLAMA2C_DIR/tokenizer.bin" \
        --checkpoint "$work/rand_v$v.safetensors" >/dev/null
      for p in "${prompts[@]}"; do
        "$work/greedy_ids" "$work/rand_v0.bin" "$LLAMA2C_DIR/tokenizer.bin" "$p" >"$work/run.ids"
        "$attn" lm generate --checkpoint "$work/rand_v$v.safetensors" --greedy --ids --max-new-tokens 100000 "$p" >"$work/attn.ids"
        compare "version $v, ids of \"$p\" ($(wc -w <"$work/run.ids") ids)" "$work/run.ids" "$work/attn.ids"
      done
    done
    "$attn" lm export --checkpoint "$work/rand_v1.safetensors" --format llama2c-v1 --model-out "$work/again_v1.bin" >/dev/null
    compare "version 1 exported back" "$work/rand_v1.bin" "$work/again_v1.bin"
  else
    echo "  skipped: no python3-torch"
  fi
  echo "== 3. tokenizers: run.c's encode against attn's, line by line"
  cat >"$work/encode.c" <<'EOF'
#define TESTING
#include "run.c"
int main(int argc, char **argv) /* model tokenizer: each line of stdin encoded, its ids after BOS */
{
    Transformer t;
    Tokenizer tok;
    static char line[1 << 20];
    static int ids[(1 << 20) + 3];
    if (argc < 3) return 2;
    build_transformer(&t, argv[1]);
    build_tokenizer(&tok, argv[2], t.config.vocab_size);
    while (fgets(line, sizeof line, stdin)) {
        int n;
        line[strcspn(line, "\n")] = '\0';
        encode(&tok, line, 1, 0, ids, &n);
        for (int i = 1; i < n; i++) printf("%s%d", i > 1 ? " " : "", ids[i]);
        printf("\n");
    }
    return 0;
}
EOF
  gcc -O2 -I"$LLAMA2C_DIR" -o "$work/encode" "$work/encode.c" -lm
  find data/aclImdb_mini -name '*.txt' | sort | head -200 | xargs cat | tr -d '\r' | sed 's/<br \/>/\n/g' |
    grep -v '^$' | head -300 | cut -b1-200 >"$work/lines.txt" || true # within the context; head closes the pipe early
  sets=("$work/back.safetensors $work/model.bin $work/tok.bin")
  [[ -f $work/rand_v0.safetensors ]] && sets+=("$work/rand_v0.safetensors $work/rand_v0.bin $LLAMA2C_DIR/tokenizer.bin")
  for set in "${sets[@]}"; do
    read -r ck_t model tok <<<"$set"
    "$work/encode" "$model" "$tok" <"$work/lines.txt" >"$work/run.enc"
    while IFS= read -r line; do
      printf '%s' "$line" | "$attn" lm generate --checkpoint "$ck_t" --ids --max-new-tokens 0
    done <"$work/lines.txt" >"$work/attn.enc"
    compare "encodings with $(basename "$tok"), $(wc -l <"$work/lines.txt") lines" "$work/run.enc" "$work/attn.enc"
  done
  echo "llama2c.sh check: $same of $total the same"
  ((same == total))
  exit
fi

# speed
rounds=${ROUNDS:-3}
gcc -Ofast -fopenmp -march=native -o "$work/runomp" "$LLAMA2C_DIR/run.c" -lm
mkdir -p bench/results
out=bench/results/llama2c_$(date -u +%Y%m%dT%H%MZ).jsonl
printf '{"tag":"host","cpu":"%s","family":"%s","model":"%s","cores":%s}\n' "$(lscpu | sed -nE 's/^Model name: +//p')" \
  "$(lscpu | sed -nE 's/^CPU family: +//p')" "$(lscpu | sed -nE 's/^Model: +//p')" "$(nproc)" >>"$out"
ck=$(attn_model)
"$attn" lm export --checkpoint "$ck" --model-out "$work/model.bin" --tokenizer-out "$work/tok.bin" >/dev/null
"$attn" lm train --style llama --context 256 --d-model 384 --layers 6 --heads 6 --vocab 4096 --max-steps 1 \
  --val-tokens 256 --checkpoint "$work/big.safetensors" >/dev/null 2>&1
"$attn" lm export --checkpoint "$work/big.safetensors" --model-out "$work/big.bin" --tokenizer-out "$work/big_tok.bin" >/dev/null
for pair in "$work/model.bin:$work/tok.bin" "$work/big.bin:$work/big_tok.bin"; do
  IFS=: read -r model tok <<<"$pair"
  for ((r = 1; r <= rounds; r++)); do
    build/bench_lm --llama2c "$model" --threads 2 | sed "s/^{/{\"round\": $r, /" >>"$out"
    tps=$(OMP_NUM_THREADS=2 "$work/runomp" "$model" -z "$tok" -t 0 -n 0 -i "" 2>&1 >/dev/null |
      sed -nE 's/achieved tok\/s: ([0-9.]+)/\1/p')
    printf '{"round": %d, "bench": "lm_decode", "impl": "llama2.c runomp", "model": "%s", "threads": 2, "decode_tokens_s": %s}\n' \
      "$r" "$model" "$tps" >>"$out"
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"lm_decode"' in l]
for model in dict.fromkeys(r["model"] for r in rows):
    med = {impl: statistics.median(r["decode_tokens_s"] for r in rows if r["model"] == model and r["impl"] == impl)
           for impl in ("attn", "llama2.c runomp")}
    shape = next(r for r in rows if r["model"] == model and r["impl"] == "attn")
    print(f"{shape['layers']} layers, width {shape['d_model']}, context {shape['context']}, vocab {shape['vocab']}: "
          f"attn {med['attn']:.1f} tokens/s, llama2.c {med['llama2.c runomp']:.1f}: "
          f"{med['attn'] / med['llama2.c runomp']:.2f}x")
print(f"results: {sys.argv[1]}")
PY
