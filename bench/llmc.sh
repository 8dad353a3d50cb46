#!/usr/bin/env bash
# attn beside llm.c (its CPU trainer train_gpt2.c and its test test_gpt2.c, built here from the
# checkout you name; nothing of it is kept):
#   check  a GPT-2 trained briefly by attn on the shipped reviews, exported as llm.c's checkpoint
#          (attn lm export --format llmc) with its token files (--export-tokens) and tokenizer, and
#          the first batch of train.bin (B 4, T 64, llm.c's defaults):
#          1. test_gpt2.c as it is, against the debug state attn writes for that batch
#             (bench/llmc_oracle state): its checks of the logits, the loss and the 16 gradients;
#             its ten steps compare against losses written into it for OpenAI's GPT-2 124M, which
#             this is not, so they fail and are reported apart;
#          2. a driver of ours around train_gpt2.c's own functions (forward, backward, update): every
#             gradient against attn's, as the largest |difference| over the tensor's largest |value|,
#             and ten AdamW steps at test_gpt2.c's settings (lr 1e-4, betas 0.9 and 0.999, eps 1e-8,
#             weight decay 0.01) against attn's on the same batch (llmc_oracle steps).
#   speed  a training step (forward, backward, AdamW) at B 4: train_gpt2.c's functions built with its
#          Makefile's flags (-Ofast -march=native -fopenmp) against attn (llmc_oracle time), both at 2
#          threads, in turns, ROUNDS each, medians: a GPT-2 of 6 layers, width 384, context 256 (T
#          256), and llm.c's default run, T 64 on 12 layers of width 768 (the 124M shape).
#   LLMC_DIR=/path/to/llm.c bash bench/llmc.sh check|speed     [ROUNDS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-check}
[[ -n ${LLMC_DIR:-} && -f $LLMC_DIR/train_gpt2.c ]] || { echo "llmc.sh: set LLMC_DIR to an llm.c checkout" >&2; exit 2; }
[[ $what == check || $what == speed ]] || { echo "llmc.sh: check or speed, not $what" >&2; exit 2; }
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF >/dev/null &&
  cmake --build build -j"$(nproc)" --target attn_cli llmc_oracle >/dev/null
attn=$PWD/build/attn oracle=$PWD/build/llmc_oracle
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# our driver around train_gpt2.c's functions (TESTING leaves its main out):
#   llmc_driver STATE N WD: the debug state's batch; each gradient against the state's; N steps' losses
#   llmc_driver time B T N: N training steps on the first batch of train.bin (after 2), median ms
cat >"$work/llmc_driver.c" <<'EOF'
#define TESTING
#include "train_gpt2.c"
static int by_value(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
int main(int argc, char **argv)
{
    GPT2 model;
    gpt2_build_from_checkpoint(&model, "gpt2_124M.bin");
    if (argc == 5 && !strcmp(argv[1], "time")) {
        int B = atoi(argv[2]), T = atoi(argv[3]), N = atoi(argv[4]);
        DataLoader loader;
        dataloader_init(&loader, "train.bin", B, T, 0, 1, 0);
        dataloader_next_batch(&loader);
        double *ms = malloc(sizeof(double) * (N + 2));
        for (int s = 0; s < N + 2; s++) {
            struct timespec a, b;
            clock_gettime(CLOCK_MONOTONIC, &a);
            gpt2_forward(&model, loader.inputs, loader.targets, B, T);
            gpt2_zero_grad(&model);
            gpt2_backward(&model);
            gpt2_update(&model, 1e-4f, 0.9f, 0.999f, 1e-8f, 0.0f, s + 1);
            clock_gettime(CLOCK_MONOTONIC, &b);
            ms[s] = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
        }
        qsort(ms + 2, N, sizeof *ms, by_value);
        printf("{\"bench\": \"llmc_step\", \"impl\": \"llm.c\", \"B\": %d, \"T\": %d, \"layers\": %d, \"channels\": %d, "
               "\"threads\": 2, \"step_ms_med\": %.2f}\n", B, T, model.config.num_layers, model.config.channels, ms[2 + N / 2]);
        return 0;
    }
    int N = atoi(argv[2]);
    float wd = atof(argv[3]);
    FILE *f = fopen(argv[1], "rb");
    int head[256];
    freadCheck(head, 4, 256, f);
    int B = head[2], T = head[3], V = model.config.vocab_size;
    int *x = malloc(4 * B * T), *y = malloc(4 * B * T);
    float *logits = malloc(4 * (size_t)B * T * V), loss, *grads = malloc(4 * model.num_parameters);
    freadCheck(x, 4, B * T, f);
    freadCheck(y, 4, B * T, f);
    freadCheck(logits, 4, (size_t)B * T * V, f);
    freadCheck(&loss, 4, 1, f);
    freadCheck(grads, 4, model.num_parameters, f);
    fclose(f);
    static const char *names[16] = {"wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
                                    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};
    for (int step = 0; step < N; step++) {
        gpt2_forward(&model, x, y, B, T);
        gpt2_zero_grad(&model);
        gpt2_backward(&model);
        if (step == 0) {
            printf("loss: llm.c %.7f, attn %.7f\n", model.mean_loss, loss);
            size_t at = 0;
            for (int k = 0; k < 16; k++) {
                float big = 0.0f, diff = 0.0f;
                for (size_t i = 0; i < model.param_sizes[k]; i++) {
                    big = fmaxf(big, fabsf(grads[at + i]));
                    diff = fmaxf(diff, fabsf(grads[at + i] - model.grads_memory[at + i]));
                }
                printf("grad %-9s max |llm.c - attn| %.3e of max |grad| %.3e: %.2e\n", names[k], diff, big, big > 0 ? diff / big : 0.0);
                at += model.param_sizes[k];
            }
        }
        gpt2_update(&model, 1e-4f, 0.9f, 0.999f, 1e-8f, wd, step + 1);
        printf("step %d: loss %f\n", step, model.mean_loss);
    }
    return 0;
}
EOF

model_for() { # layers width context -> $work/<name>.bin, train.bin, tokenizer (a few training steps of attn)
  local layers=$1 width=$2 context=$3 heads=$(($2 / 64))
  "$attn" lm train --style gpt2 --layers "$layers" --d-model "$width" --heads "$heads" --context "$context" \
    --vocab 4096 --max-steps "${STEPS:-60}" --val-tokens 4096 --export-tokens "$work" \
    --checkpoint "$work/lm.safetensors" >"$work/train.log" 2>&1
  "$attn" lm export --checkpoint "$work/lm.safetensors" --format llmc --model-out "$work/gpt2_124M.bin" \
    --tokenizer-out "$work/gpt2_tokenizer.bin" >/dev/null
}

if [[ $what == check ]]; then
  model_for 2 128 64
  (cd "$work" && "$oracle" state gpt2_124M.bin train.bin 4 64 gpt2_124M_debug_state.bin >/dev/null)
  gcc -O3 -fopenmp -I"$LLMC_DIR" -o "$work/test_gpt2" "$LLMC_DIR/test_gpt2.c" -lm
  gcc -O3 -fopenmp -I"$LLMC_DIR" -o "$work/llmc_driver" "$work/llmc_driver.c" -lm
  echo "== 1. test_gpt2.c against attn's debug state (a GPT-2 of 2 layers, width 128, vocabulary 4096; B 4, T 64)"
  (cd "$work" && OMP_NUM_THREADS=2 ./test_gpt2 >test.log 2>&1) || true
  grep -E "OK \(LOGITS\)|LOSS (OK|MISMATCH)|TENSOR (NOT )?OK|^d[a-z0-9]+$|overall" "$work/test.log" | paste - - 2>/dev/null |
    sed 's/^/  /' || true
  grep -E "OK \(LOGITS\)|LOSS OK" "$work/test.log" | sed 's/^/  /'
  echo "  its ten steps against GPT-2 124M's losses: $(grep -c 'OK = 0' "$work/test.log") of 10 differ (expected: another model)"
  echo "== 2. llm.c's functions against attn: gradients and ten AdamW steps (weight decay 0.01)"
  (cd "$work" && OMP_NUM_THREADS=2 ./llmc_driver gpt2_124M_debug_state.bin 10 0.01 >driver.log)
  (cd "$work" && "$oracle" steps gpt2_124M.bin train.bin 4 64 10 0.01 >attn.log)
  grep -E "^(loss|grad)" "$work/driver.log" | sed 's/^/  /'
  paste <(grep '^step' "$work/driver.log") <(grep '^step' "$work/attn.log" | sed 's/.*loss //') |
    awk '{printf "  step %s llm.c %s attn %s |diff| %.2e\n", $2, $4, $5, ($4 > $5 ? $4 - $5 : $5 - $4)}'
  exit
fi

rounds=${ROUNDS:-3}
gcc -Ofast -march=native -fopenmp -I"$LLMC_DIR" -o "$work/llmc_driver" "$work/llmc_driver.c" -lm
mkdir -p bench/results
out=bench/results/llmc_$(date -u +%Y%m%dT%H%MZ).jsonl
printf '{"tag":"host","cpu":"%s","family":"%s","model":"%s","cores":%s}\n' "$(lscpu | sed -nE 's/^Model name: +//p')" \
  "$(lscpu | sed -nE 's/^CPU family: +//p')" "$(lscpu | sed -nE 's/^Model: +//p')" "$(nproc)" >>"$out"
for shape in "6 384 256" "12 768 64"; do
  read -r layers width T <<<"$shape"
  STEPS=1 model_for "$layers" "$width" "$T"
  for ((r = 1; r <= rounds; r++)); do
    (cd "$work" && OMP_NUM_THREADS=2 ./llmc_driver time 4 "$T" 5) | grep '^{' | sed "s/^{/{\"round\": $r, /" >>"$out"
    (cd "$work" && "$oracle" time gpt2_124M.bin train.bin 4 "$T" 5) | sed "s/^{/{\"round\": $r, /" >>"$out"
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"llmc_step"' in l]
for shape in dict.fromkeys((r["layers"], r["channels"], r["T"]) for r in rows):
    med = {impl: statistics.median(r["step_ms_med"] for r in rows if (r["layers"], r["channels"], r["T"]) == shape
                                   and r["impl"] == impl) for impl in ("attn", "llm.c")}
    print(f"{shape[0]} layers, width {shape[1]}, B 4, T {shape[2]}: attn {med['attn']:.1f} ms, "
          f"llm.c {med['llm.c']:.1f} ms: {med['llm.c'] / med['attn']:.2f}x")
print(f"results: {sys.argv[1]}")
PY
