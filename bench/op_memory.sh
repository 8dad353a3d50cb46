#!/usr/bin/env bash
# Peak memory of `attn op sdpa` against the bytes it must hold: its inputs (q, k, v, and grad_out
# for the backward) and its outputs (out, and dq, dk, dv). The peak resident set is GNU time's
# %M, which counts the program itself too (its libraries: about 15 MB here).
#   bash bench/op_memory.sh [B H L D]      (default 8 8 4096 64; 2 threads)
# Needs /usr/bin/time and /usr/bin/python3 with numpy (Debian's python3-numpy) (the inputs); writes them under build/op_memory/.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-8} H=${2:-8} L=${3:-4096} D=${4:-64}
[[ -x /usr/bin/time ]] || { echo "op_memory: /usr/bin/time not found (Debian's time package)" >&2; exit 1; }
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF >/dev/null
cmake --build build -j"$(nproc)" --target attn_cli >/dev/null
dir=build/op_memory
mkdir -p "$dir"
/usr/bin/python3 - "$dir" "$B" "$H" "$L" "$D" <<'EOF'
import json, struct, sys
import numpy as np
out, shape = sys.argv[1], tuple(int(x) for x in sys.argv[2:6])
rng = np.random.default_rng(0)
q, k, v, g = (rng.standard_normal(shape, dtype=np.float32) for _ in range(4))
def write(path, tensors):
    header, at = {}, 0
    for name, a in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [at, at + a.nbytes]}
        at += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for a in tensors.values():
            f.write(a.astype("<f4").tobytes())
write(f"{out}/fwd.safetensors", {"q": q, "k": k, "v": v})
write(f"{out}/bwd.safetensors", {"q": q, "k": k, "v": v, "grad_out": g})
EOF
tensor_kb=$((B * H * L * D * 4 / 1024))
echo "attn op sdpa, B $B H $H L $L d $D, 2 threads; $(lscpu | sed -nE 's/^Model name: +//p')"
for run in fwd bwd; do
  if [[ $run == fwd ]]; then held=$((4 * tensor_kb)); else held=$((8 * tensor_kb)); fi # (q k v | out), + (g | dq dk dv)
  peak=$(/usr/bin/time -f %M build/attn op sdpa --in "$dir/$run.safetensors" --out "$dir/out.safetensors" --threads 2 \
         2>&1 >/dev/null | tail -1)
  awk -v r="$run" -v p="$peak" -v h="$held" \
    'BEGIN { printf "%s: peak %.1f MiB, inputs + outputs %.1f MiB: %.3fx\n", r == "fwd" ? "forward" : "forward + backward", p / 1024, h / 1024, p / h }'
done
rm -rf "$dir"
