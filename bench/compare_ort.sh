#!/usr/bin/env bash
# Runs ONNX Runtime 1.30 (CPU, float32) beside us in one run, on the same inputs:
#   - SDPA forward, B 8, H 8, d 64, L 512-4096, causal and not: ORT's com.microsoft
#     MultiHeadAttention (its fused kernel), the ONNX Attention op of opset 23, and the plain math
#     graph (MatMul, Softmax, MatMul); ours: bench_ort (bench/bench_ort.c: attn_sdpa, fused).
#   - nn.TransformerEncoderLayer(512, 8, 2048) forward, B 8, L 256, exported from PyTorch 1.13
#     to ONNX (opset 17); ours: bench_ort encoder with the same weights.
# Every output is cross-checked against ours (max |difference|, must be <= 1e-4). ORT's time is
# its native session run (its profiler's model_run events, bench/ort/run_ort.js), not the Node.js
# call around it. 2 threads on both sides (ORT: intra-op threads 2, sequential); rows alternate
# ours / ORT so both see the same load, ROUNDS times over (the machine is shared: a row's figure
# is the median of its rounds' medians); `attn bench peak`, first and last, gives the float32
# ceiling of the run (the higher of the two).
# ONNX Runtime is installed here, into build-ort/ (npm, onnxruntime-node 1.30.0, whose package
# holds the CPU binaries); models and inputs are written to build-ort/work/ (per L, then removed).
# Appends to bench/results/ort_<time>.jsonl and rebuilds bench/RESULTS.md.
#   bash bench/compare_ort.sh [L ...]     (default L: 512 1024 2048 4096; RUNS=N timed runs per
#                                          round, default 10; ROUNDS=N, default 3; PRECISION=medium:
#                                          ours at --matmul-precision medium, bf16 products)
# Needs node and npm (Node.js 20), and /usr/bin/python3 with torch and onnx (the models). Not
# needed by the tests or CI.
set -euo pipefail
cd "$(dirname "$0")/.."
lens=("$@"); [[ ${#lens[@]} -gt 0 ]] || lens=(512 1024 2048 4096)
runs=${RUNS:-10} rounds=${ROUNDS:-3} precision=${PRECISION:-highest}
threads=2
for tool in node npm /usr/bin/python3; do
  command -v "$tool" >/dev/null || { echo "compare_ort: $tool not found" >&2; exit 1; }
done
/usr/bin/python3 -c "import torch, onnx" 2>/dev/null || { echo "compare_ort: /usr/bin/python3 needs torch and onnx" >&2; exit 1; }

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF >/dev/null
cmake --build build -j"$(nproc)" --target attn_cli bench_ort >/dev/null
ort_dir=$PWD/build-ort
if [[ ! -f $ort_dir/node_modules/onnxruntime-node/package.json ]]; then
  echo "installing onnxruntime-node 1.30.0 into $ort_dir" >&2
  mkdir -p "$ort_dir"
  # the package's install script would download GPU binaries (and fails offline): skipped, the
  # CPU binaries are in the package
  (cd "$ort_dir" && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund --prefix . onnxruntime-node@1.30.0 >/dev/null)
fi
export NODE_PATH=$ort_dir/node_modules
work=$ort_dir/work
rm -rf "$work"; mkdir -p "$work"
mkdir -p bench/results
# a run at medium is kept apart (ort-medium_*): RESULTS.md's ONNX Runtime section is float32 on both sides
out=$PWD/bench/results/ort$([[ $precision == highest ]] || echo "-$precision")_$(date -u +%Y%m%dT%H%MZ).jsonl
models=$PWD/bench/ort/ort_models.py
runner=$PWD/bench/ort/run_ort.js
bench_ort=$PWD/build/bench_ort

source bench/record.sh
record() { # tag, JSON lines (one object each): appends {"tag":..., "result":...} per line
  record_rows "$1" "$out" <<<"$2"
}

# ours: bench_ort; then each ORT variant and its max difference from ours, merged into one result
ort_row() { # tag, what, L, causal(true|false), ours output, model, layout, inputs...
  local tag=$1 what=$2 L=$3 causal=$4 ours=$5 model=$6 layout=$7; shift 7
  local res diff
  res=$(node "$runner" "$model" "$work/ort.bin" "$runs" "$threads" "$@")
  diff=$(/usr/bin/python3 "$models" diff "$ours" "$work/ort.bin" "$layout")
  record "$tag" "$(/usr/bin/python3 -c 'import json, sys; r = json.loads(sys.argv[1]); r.update(json.loads(sys.argv[2])); r.update(what=sys.argv[3], L=int(sys.argv[4]), causal=sys.argv[5] == "true"); print(json.dumps(r))' "$res" "$diff" "$what" "$L" "$causal")"
  rm -f "$work/ort.bin"
}

record "attn peak" "$(build/attn bench peak --threads "$threads" --json)"
for L in "${lens[@]}"; do
  /usr/bin/python3 "$models" sdpa "$work" "$L"
  bhld="8x8x${L}x64" bld="8x${L}x512"
  for mask in none causal; do
    causal=false flag=""
    [[ $mask == causal ]] && causal=true flag=--causal
    echo "sdpa L=$L $mask" >&2
    for ((round = 0; round < rounds; round++)); do
      record "attn" "$("$bench_ort" sdpa "$work/sdpa.safetensors" "$work/ours.safetensors" $flag --runs "$runs" --threads "$threads" --matmul-precision "$precision")"
      ort_row "ort mha" sdpa "$L" "$causal" "$work/ours.safetensors" "$work/mha_$mask.onnx" bld \
        "q=$work/q_bsd.bin:$bld" "k=$work/k_bsd.bin:$bld" "v=$work/v_bsd.bin:$bld"
      ort_row "ort attention23" sdpa "$L" "$causal" "$work/ours.safetensors" "$work/attention23_$mask.onnx" bhld \
        "q=$work/q.bin:$bhld" "k=$work/k.bin:$bhld" "v=$work/v.bin:$bhld"
      ort_row "ort math" sdpa "$L" "$causal" "$work/ours.safetensors" "$work/math_$mask.onnx" bhld \
        "q=$work/q.bin:$bhld" "k=$work/k.bin:$bhld" "v=$work/v.bin:$bhld"
    done
  done
  rm -f "$work"/*
done
echo "encoder layer" >&2
/usr/bin/python3 "$models" encoder "$work" 2>/dev/null
for ((round = 0; round < rounds; round++)); do
  record "attn" "$("$bench_ort" encoder "$work/encoder.safetensors" "$work/ours.safetensors" --runs "$runs" --threads "$threads" --matmul-precision "$precision")"
  ort_row "ort encoder" encoder 256 false "$work/ours.safetensors" "$work/encoder.onnx" bhld "x=$work/x.bin:8x256x512"
done
rm -rf "$work"
# the ceiling again at the end: the higher of the two is the run's (a neighbour's load lowers one)
record "attn peak" "$(build/attn bench peak --threads "$threads" --json)"

/usr/bin/python3 bench/make_results.py --out bench/RESULTS.md bench/results
/usr/bin/python3 bench/make_results.py --ort bench/results
echo "wrote $out and bench/RESULTS.md" >&2
