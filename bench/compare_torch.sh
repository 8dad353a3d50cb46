#!/usr/bin/env bash
# Runs our benchmarks (`attn bench --json`) and PyTorch's (../shared/bench/bench_torch.py: the
# seed's SDPA math path, nn.MultiheadAttention, nn.TransformerEncoderLayer + Adam, the seed's
# classifier) in one run, alternating row by row so both sides see the same machine load, each
# in its own process under /usr/bin/time -v (peak RSS). Every row: ours with 2 threads and with
# 1 (thread scaling), PyTorch with glibc's default allocator and with GLIBC_TUNABLES that keep
# freed blocks in the heap. Appends to bench/results/<group>_<time>.jsonl, rebuilds RESULTS.md.
#   bash bench/compare_torch.sh [all]          (everything below in one run: the README's table)
#   bash bench/compare_torch.sh sdpa [L ...]   (default L: 512 1024 2048 4096)
#   bash bench/compare_torch.sh models         (mha, encoder, classifier training steps)
# Every group starts with `attn bench peak` (FMA loop at each kernel level, 2 threads and 1): the
# float32 ceilings. PyTorch runs as well as it can here: on OpenBLAS (Debian's torch calls
# libblas.so.3, which is the reference BLAS, 20-50x slower, unless libopenblas0-pthread provides
# it: the script refuses to run otherwise, and records the library), with the faster of 1 and 2
# intra-op threads on an encoder training step and an SDPA forward+backward (recorded as
# "torch threads"; OpenBLAS keeps its own threads either way).
# Needs python3-torch and libopenblas0-pthread (apt-get install python3-torch libopenblas0-pthread).
set -euo pipefail
cd "$(dirname "$0")/.."
group=${1:-all}; shift || true
lens=("$@"); [[ ${#lens[@]} -gt 0 ]] || lens=(512 1024 2048 4096)
case $group in all|sdpa|models) ;; *) echo "compare_torch: unknown group $group (all, sdpa or models)" >&2; exit 2 ;; esac
torch_bench=../shared/bench/bench_torch.py
[[ -f $torch_bench ]] || { echo "compare_torch: $torch_bench not found" >&2; exit 1; }
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF >/dev/null && cmake --build build -j"$(nproc)" --target attn_cli >/dev/null
mkdir -p bench/results
out=bench/results/${group}_$(date -u +%Y%m%dT%H%MZ).jsonl
tunables=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736

measure() { # tag, command...: appends {"tag":..., "rss_kib":..., "result": <last JSON line>}
  local tag=$1; shift
  local log; log=$(mktemp)
  if /usr/bin/time -v "$@" >"$log.out" 2>"$log"; then
    local rss; rss=$(sed -nE 's/.*Maximum resident set size \(kbytes\): ([0-9]+)/\1/p' "$log")
    printf '{"tag":"%s","rss_kib":%s,"result":%s}\n' "$tag" "$rss" "$(tail -1 "$log.out")" >>"$out"
  else
    printf '{"tag":"%s","error":"%s"}\n' "$tag" "$(tail -1 "$log" | tr -d '"\\')" >>"$out"
  fi
  rm -f "$log" "$log.out"
}

# The BLAS library torch's process has mapped after a product: OpenBLAS, or the script stops.
torch_blas=$(/usr/bin/python3 -c 'import torch
a = torch.ones(256, 256); (a @ a).sum().item()
print(" ".join(sorted({l.split()[-1] for l in open("/proc/self/maps") if "blas" in l.split()[-1]})))')
printf '{"tag":"torch blas","blas":"%s"}\n' "$torch_blas" >>"$out"
printf '{"tag":"host","cpu":"%s","family":"%s","model":"%s","cores":%s}\n' "$(lscpu | sed -nE 's/^Model name: +//p')" \
       "$(lscpu | sed -nE 's/^CPU family: +//p')" "$(lscpu | sed -nE 's/^Model: +//p')" "$(nproc)" >>"$out"
echo "PyTorch's BLAS: $torch_blas" >&2
if [[ $torch_blas != *openblas* ]]; then
  echo "compare_torch: PyTorch runs the reference BLAS here ($torch_blas); apt-get install libopenblas0-pthread" >&2
  exit 1
fi

# PyTorch's faster intra-op thread count of 1 and 2 (sum of the medians of two workloads)
torch_ms() { # threads, bench_torch.py arguments: the median ms
  /usr/bin/python3 "$torch_bench" "${@:2}" --threads "$1" | tail -1 |
    sed -nE 's/.*"t_med": ?([0-9.e+-]+).*/\1/p' | awk '{ print $1 * 1000 }'
}
declare -A torch_total
for n in 1 2; do
  torch_total[$n]=$(awk -v a="$(torch_ms "$n" encoder --mode train)" -v b="$(torch_ms "$n" sdpa --L 1024 --mask none --mode fwdbwd)" \
                    'BEGIN { print a + b }')
done
torch_threads=$(awk -v a="${torch_total[1]}" -v b="${torch_total[2]}" 'BEGIN { print (a <= b) ? 1 : 2 }')
printf '{"tag":"torch threads","threads":%s,"ms_1":%s,"ms_2":%s}\n' "$torch_threads" "${torch_total[1]}" "${torch_total[2]}" >>"$out"
echo "PyTorch threads: $torch_threads (encoder train + sdpa L=1024 fwdbwd: ${torch_total[1]} ms on 1, ${torch_total[2]} ms on 2)" >&2

row() { # label, our bench args, torch bench args
  local label=$1 ours=$2 theirs=$3
  echo "$label" >&2
  measure "attn" build/attn bench $ours --threads 2 --json
  measure "torch" /usr/bin/python3 "$torch_bench" $theirs --threads "$torch_threads"
  measure "torch tunables" env GLIBC_TUNABLES=$tunables /usr/bin/python3 "$torch_bench" $theirs --threads "$torch_threads"
  measure "attn 1 thread" build/attn bench $ours --threads 1 --json
}

sdpa_rows() {
    for L in "${lens[@]}"; do
      measure "attn sgemm" build/attn bench sgemm --L "$L" --threads 2 --json
      for mask in none causal; do
        causal=""; [[ $mask == causal ]] && causal=--causal
        for pass in fwd fwdbwd; do
          row "sdpa L=$L $mask $pass" "sdpa --L $L $causal --mode $pass --impl fused" "sdpa --L $L --mask $mask --mode $pass"
          measure "attn ref" build/attn bench sdpa --L "$L" $causal --mode "$pass" --impl ref --threads 2 --json
        done
      done
    done
}

model_rows() {
    row "mha train" "mha" "mha --L 512 --mode train"
    row "encoder train" "encoder" "encoder --mode train"
    row "classifier train" "classifier" "classifier --mode train"
    # bf16: ours at --matmul-precision medium against PyTorch's autocast to bf16
    echo "encoder train, bf16" >&2
    measure "attn medium" build/attn bench encoder --matmul-precision medium --threads 2 --json
    measure "torch bf16" /usr/bin/python3 bench/torch/bench_torch_bf16.py encoder --mode train --threads "$torch_threads"
}

measure "attn peak" build/attn bench peak --threads 2 --json
measure "attn peak 1 thread" build/attn bench peak --threads 1 --json
[[ $group == models ]] || sdpa_rows
[[ $group == sdpa ]] || model_rows
/usr/bin/python3 bench/make_results.py --out bench/RESULTS.md bench/results
echo "wrote $out and bench/RESULTS.md" >&2
