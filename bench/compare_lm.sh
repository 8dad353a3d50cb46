#!/usr/bin/env bash
# attn's language model against PyTorch 1.13's same model (bench/torch/lm.py, nanoGPT's GPT-2
# composition) on one machine in one run: a training step and decoding with the key/value cache at
# batch 1, GPT-2 style, 6 layers, width 384, 6 heads, context 256, batch 8, vocabulary 4096.
# Rounds alternate attn (2 threads) with PyTorch at 1 and at 2 intra-op threads (OpenBLAS keeps its
# own threads either way), so both see the same load; PyTorch's best setting is its faster median.
# Appends every JSON line to bench/results/lm_<time>.jsonl and prints the medians and ratios.
#   bash bench/compare_lm.sh [ROUNDS]     (default 3; needs python3-torch and libopenblas0-pthread)
# With LLMC_DIR or LLAMA2C_DIR naming a checkout of llm.c or llama2.c, it then runs bench/llmc.sh
# speed (training steps against llm.c's) and bench/llama2c.sh speed (decoding against llama2.c's).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF >/dev/null && cmake --build build -j"$(nproc)" --target bench_lm >/dev/null
torch_blas=$(/usr/bin/python3 -c 'import torch
a = torch.ones(256, 256); (a @ a).sum().item()
print(" ".join(sorted({l.split()[-1] for l in open("/proc/self/maps") if "blas" in l.split()[-1]})))')
[[ $torch_blas == *openblas* ]] || { echo "compare_lm: PyTorch runs $torch_blas, not OpenBLAS; apt-get install libopenblas0-pthread" >&2; exit 1; }
mkdir -p bench/results
out=bench/results/lm_$(date -u +%Y%m%dT%H%MZ).jsonl
printf '{"tag":"host","cpu":"%s","family":"%s","model":"%s","cores":%s,"torch_blas":"%s"}\n' "$(lscpu | sed -nE 's/^Model name: +//p')" \
  "$(lscpu | sed -nE 's/^CPU family: +//p')" "$(lscpu | sed -nE 's/^Model: +//p')" "$(nproc)" "$torch_blas" >>"$out"
for ((r = 1; r <= rounds; r++)); do
  build/bench_lm --threads 2 --steps 10 | sed "s/^{/{\"round\": $r, /" >>"$out"
  for t in 1 2; do /usr/bin/python3 bench/torch/lm.py step --threads $t --steps 10 | sed "s/^{/{\"round\": $r, /" >>"$out"; done
done
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"bench"' in l]
def med(impl, threads, key):
    return statistics.median(r[key] for r in rows if r["impl"] == impl and r["threads"] == threads)
attn_step, attn_dec = med("attn", 2, "step_ms_med"), med("attn", 2, "decode_tokens_s")
best = min((med("torch", t, "step_ms_med"), t) for t in (1, 2))
best_dec = max((med("torch", t, "decode_tokens_s"), t) for t in (1, 2))
print(f"training step: attn {attn_step:.1f} ms, PyTorch {best[0]:.1f} ms ({best[1]} thread(s)): {best[0] / attn_step:.2f}x")
print(f"decode at batch 1: attn {attn_dec:.1f} tokens/s, PyTorch {best_dec[0]:.1f} ({best_dec[1]} thread(s)): "
      f"{attn_dec / best_dec[0]:.2f}x")
print(f"results: {sys.argv[1]}")
PY
if [[ -n ${LLMC_DIR:-} ]]; then ROUNDS=$rounds bash bench/llmc.sh speed; fi
if [[ -n ${LLAMA2C_DIR:-} ]]; then ROUNDS=$rounds bash bench/llama2c.sh speed; fi
