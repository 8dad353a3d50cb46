#!/usr/bin/env bash
# Runs our SDPA benchmark and PyTorch's (the seed's math path, ../shared/bench/bench_torch.py) in
# one run, alternating config by config so both see the same machine load, each in its own
# process under /usr/bin/time -v (peak RSS). PyTorch runs twice per config: glibc's default
# allocator and GLIBC_TUNABLES that keep freed blocks in the heap. Writes bench/results/*.jsonl
# and bench/RESULTS.md.
#   bash bench/compare_torch.sh [L ...]        (default 128 512 1024 2048 4096)
# Needs python3-torch (apt-get install python3-torch) and a release build in build/.
set -euo pipefail
cd "$(dirname "$0")/.."
lens=("$@"); [[ ${#lens[@]} -gt 0 ]] || lens=(128 512 1024 2048 4096)
torch_bench=../shared/bench/bench_torch.py
[[ -f $torch_bench ]] || { echo "compare_torch: $torch_bench not found" >&2; exit 1; }
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build -j"$(nproc)" --target bench_sdpa >/dev/null
mkdir -p bench/results
out=bench/results/sdpa_$(date -u +%Y%m%dT%H%MZ).jsonl
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

for L in "${lens[@]}"; do
  for mask in none causal; do
    causal=(); [[ $mask == causal ]] && causal=(--causal)
    for pass in fwd fwdbwd; do
      echo "L=$L mask=$mask pass=$pass" >&2
      measure "attn fused" build/bench_sdpa "$L" "${causal[@]}" --impl fused --pass "$pass" --json
      measure "torch" /usr/bin/python3 "$torch_bench" sdpa --L "$L" --mask "$mask" --mode "$pass"
      measure "torch tunables" env GLIBC_TUNABLES=$tunables /usr/bin/python3 "$torch_bench" sdpa --L "$L" --mask "$mask" --mode "$pass"
      measure "attn ref" build/bench_sdpa "$L" "${causal[@]}" --impl ref --pass "$pass" --json
    done
  done
done
/usr/bin/python3 bench/make_results.py "$out" > bench/RESULTS.md
echo "wrote $out and bench/RESULTS.md" >&2
