#!/usr/bin/env bash
# A benchmark results file, written as bench/compare_ort.sh writes it (bench/record.sh: `attn
# bench peak --json`, one line per kernel level, and bench_ort's row on a small input), is read
# back by bench/make_results.py --ort: it parses, the run's ceiling is its peak rows' highest
# figure, and the row is in the table. (The file that broke: every level's line in one record.)
#   bash tests/bench_results.sh ATTN_BIN BENCH_ORT    (exit 77, skipped, without python3)
set -u
cd "$(dirname "$0")/.." || exit 1
attn=$1 bench_ort=$2
python=/usr/bin/python3
[[ -x $python ]] || python=$(command -v python3) || { echo "bench_results: skipped (no python3)"; exit 77; }
source bench/record.sh
work=$(mktemp -d /tmp/attn-bench-results.XXXXXX)
trap 'rm -rf "$work"' EXIT
out=$work/ort_20990101T0000Z.jsonl
"$python" - "$work/sdpa.safetensors" <<'PY'
import json, random, struct, sys
random.seed(1)
shape, n = [8, 8, 16, 64], 8 * 8 * 16 * 64
header, blobs = {}, []
for i, name in enumerate("qkv"):
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [4 * n * i, 4 * n * (i + 1)]}
    blobs.append(struct.pack(f"<{n}f", *(random.gauss(0, 1) for _ in range(n))))
text = json.dumps(header).encode()
text += b" " * (-(8 + len(text)) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
PY
peak=$("$attn" bench peak --threads 1 --runs 3 --json) || { echo "bench_results: attn bench peak failed"; exit 1; }
record_rows "attn peak" "$out" <<<"$peak"
"$bench_ort" sdpa "$work/sdpa.safetensors" "$work/ours.safetensors" --runs 3 --threads 1 | record_rows "attn" "$out" ||
  { echo "bench_results: bench_ort failed"; exit 1; }
levels=$(grep -c . <<<"$peak")
[[ $(grep -c '"tag":"attn peak"' "$out") == "$levels" ]] || { echo "bench_results: $levels peak lines, not one record each"; exit 1; }
best=$("$python" -c "import json, sys; print('%.1f' % max(json.loads(l)['gflops_med'] for l in sys.stdin if l.strip()))" <<<"$peak")
table=$("$python" bench/make_results.py --ort "$work") || { echo "bench_results: make_results.py refused the file"; exit 1; }
grep -qF "Float32 ceiling of the run (\`attn bench peak\`): $best GFLOP/s" <<<"$table" ||
  { echo "bench_results: the ceiling is not the peak rows' highest ($best GFLOP/s):"; echo "$table"; exit 1; }
grep -qE '^\| 16 \| none \| [0-9.]+ ' <<<"$table" || { echo "bench_results: no row for L 16:"; echo "$table"; exit 1; }
echo "bench_results: $levels peak records and the sdpa row read back; ceiling $best GFLOP/s"
