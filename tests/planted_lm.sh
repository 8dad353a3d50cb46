#!/usr/bin/env bash
# Planted bugs against the language model's goldens (issue 38): each bug below is written into the
# working tree by one sed expression, test_golden_lm is rebuilt in BUILD (default build/) and run,
# and the file is put back. A bug that the goldens do not catch makes this script fail; so does an
# expression that no longer changes its file (the code moved: the bug was not planted).
#   bash tests/planted_lm.sh [BUILD]
# Not a ctest: it edits the tree it runs in (each file is restored on exit, even on ^C).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[[ -f $build/CMakeCache.txt ]] || { echo "planted_lm: $build is not a configured build folder" >&2; exit 2; }

# name | file | sed expression (one line each)
plants=(
  # the keys are not rotated: RoPE on the queries' side only
  'rope_one_side|src/nn/mha.c|s/if (!r.positions || !(k = attn_rope(ctx, k, &r))) return NULL;/if (!r.positions) return NULL;/'
  # the causal mask lets each query see one key past itself
  'causal_off_by_one|src/kernels/attention_mask.c|s/if (m->causal && i + 1 < end) end = i + 1;/if (m->causal \&\& i + 2 < end) end = i + 2;/'
  # the document boundaries given to the attention one token early: a document's first query
  # sees the previous document's last token (and its rotary positions restart one early)
  'boundary_off_by_one|src/models/lm.c|s/cu_seqlens, batch, true, rope);/cu_bug, batch, true, rope);/;/attn__cu_positions(ctx, cu_seqlens, batch);/a int64_t cu_bug[64]; for (int64_t b = 0; b <= batch && b < 64; b++) cu_bug[b] = cu_seqlens[b] - (b > 0 && b < batch && cu_seqlens[b] > cu_seqlens[b - 1]);'
  # the attention's residual dropped: x = attn(norm1 x)
  'missing_residual|src/models/lm.c|s/x = attn__add_dropout(ctx, x, a, p);/x = a;/'
)

restore=()
cleanup() { for f in "${restore[@]}"; do [[ -f $f.planted_orig ]] && mv -f "$f.planted_orig" "$f"; done; }
trap cleanup EXIT INT TERM

caught=0 missed=0
for row in "${plants[@]}"; do
  IFS='|' read -r name file expr <<<"$row"
  cp -p "$file" "$file.planted_orig"; restore+=("$file")
  sed -i "$expr" "$file"
  if cmp -s "$file" "$file.planted_orig"; then
    echo "planted_lm: $name: the expression changed nothing in $file (the code moved)"; missed=$((missed + 1))
    mv -f "$file.planted_orig" "$file"; continue
  fi
  if ! cmake --build "$build" --target test_golden_lm -j"$(nproc)" >/tmp/planted_lm_build.$$ 2>&1; then
    tail -20 /tmp/planted_lm_build.$$; echo "planted_lm: $name: the planted tree does not build"; missed=$((missed + 1))
  else
    out=$("$build/test_golden_lm" 2>&1); rc=$?
    fails=$(grep -c "^FAIL" <<<"$out")
    if ((rc != 0 && fails > 0)); then
      echo "planted_lm: $name: caught, $fails failed checks, e.g. $(grep -m1 '^FAIL' <<<"$out" | cut -c1-150)"
      caught=$((caught + 1))
    else
      echo "planted_lm: $name: NOT caught (exit $rc)"; missed=$((missed + 1))
    fi
  fi
  mv -f "$file.planted_orig" "$file"
done
rm -f /tmp/planted_lm_build.$$
cmake --build "$build" --target test_golden_lm -j"$(nproc)" >/dev/null 2>&1 # the real tree's test again
echo "planted_lm: $caught caught, $missed missed"
((missed == 0))
