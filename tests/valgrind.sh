#!/usr/bin/env bash
# A short run of every subcommand under valgrind memcheck: 0 errors and 0 bytes definitely lost
# each (fontconfig, pango and OpenMP keep memory "still reachable" or "possibly lost" until exit:
# not ours, not counted). The commands are those `attn --help` lists (the program's command
# table): one without a run below fails the script, so a new command cannot skip it.
#   attn shapes, attn nw --epochs 2 (with its plot), attn classify train on 20 reviews (1 epoch,
#   max-len 32, embed-dim 16), attn translate train on 24 sentence pairs (a 1-layer d=16
#   Transformer, 1 epoch, then BLEU), attn lm train (a 1-layer d=16 model, 3 steps) then generate
#   from a one-byte prompt, attn op sdpa with grad_out and --need-weights, attn plot heatmap,
#   attn bench sdpa (L 32, one run), attn tour (three steps with their figures and --save).
# valgrind cannot run AVX-512 code, so the program is built without -march=native
# (build-valgrind/, RelWithDebInfo), unless ATTN_BIN names one.
# Usage: tests/valgrind.sh   Ends with "valgrind: N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
root=$PWD
command -v valgrind >/dev/null || { echo "valgrind: not installed (apt-get install valgrind)"; echo "valgrind: 0 passed, 1 failed"; exit 1; }
bin=${ATTN_BIN:-}
if [[ -z $bin ]]; then
  bin=$root/build-valgrind/attn
  if ! { cmake -S . -B build-valgrind -DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTN_NATIVE=OFF -DATTN_BUILD_TESTS=OFF >/dev/null &&
         cmake --build build-valgrind -j"$(nproc)" --target attn_cli >/dev/null; }; then
    echo "valgrind: could not build build-valgrind"; echo "valgrind: 0 passed, 1 failed"; exit 1
  fi
fi
source tests/robustness/lib.sh
work=$(mktemp -d /tmp/attn-valgrind.XXXXXX)
trap 'rm -rf "$work"' EXIT
make_imdb "$work/imdb" 10 5
make_pairs "$work/pairs" 24
st_file "$work/qkv.safetensors" '{"q":{"dtype":"F32","shape":[1,2,3,2],"data_offsets":[0,48]},"k":{"dtype":"F32","shape":[1,2,3,2],"data_offsets":[48,96]},"v":{"dtype":"F32","shape":[1,2,3,2],"data_offsets":[96,144]},"grad_out":{"dtype":"F32","shape":[1,2,3,2],"data_offsets":[144,192]}}' \
  "$(f32 1 0 0 1 1 1 0 0 0.5 0.5 -1 2)$(f32 0.5 0 1 1 -1 0 2 1 0 0.5 1 1)$(f32 1 0 0 1 1 1 0 0 0.5 0.5 -1 2)$(f32 1 1 1 1 1 1 1 1 1 1 1 1)"

passed=0
failed=0
summary=()
check() { # name, command...
  local name=$1
  shift
  local log=$work/$name.vg t0=$SECONDS
  valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite \
           --suppressions="$root/tests/valgrind.supp" --num-callers=30 --log-file="$log" "$@" >"$work/$name.out" 2>"$work/$name.err"
  local rc=$?
  local errors definite
  errors=$(sed -nE 's/.*ERROR SUMMARY: ([0-9,]+) errors.*/\1/p' "$log" | tail -1 | tr -d ,)
  definite=$(sed -nE 's/.*definitely lost: ([0-9,]+) bytes.*/\1/p' "$log" | tail -1 | tr -d ,)
  definite=${definite:-0}
  local suppressed
  suppressed=$(sed -nE 's/.*suppressed: ([0-9,]+) bytes.*/\1/p' "$log" | tail -1)
  local line
  line=$(printf '%-13s exit %d, %s errors, %s bytes definitely lost (fontconfig suppressed: %s bytes), %s s' \
         "$name" "$rc" "${errors:-?}" "$definite" "${suppressed:-0}" "$((SECONDS - t0))")
  summary+=("$line")
  if [[ $rc == 0 && $errors == 0 && $definite == 0 ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "valgrind: FAIL: $line"
    tail -5 "$work/$name.err"
    grep -A25 -E "Invalid|uninitialised|definitely lost in" "$log" | head -80
  fi
}

check shapes "$bin" shapes --len 6 --dk 8
check nw "$bin" nw --epochs 2 --plot "$work/fit.png" --out "$work/nw.safetensors"
check classify "$bin" classify train --data "$work/imdb" --epochs 1 --batch-size 4 --max-len 32 --embed-dim 16 \
  --heads 2 --hidden 16 --threads 1 --checkpoint "$work/cls.safetensors" --checkpoint-every 2
check translate "$bin" translate train --data "$work/pairs" --d-model 16 --heads 2 --ffn 16 --layers 1 --epochs 1 \
  --batch-size 8 --min-freq 1 --max-len 12 --threads 1 --checkpoint "$work/tr.safetensors"
check op_sdpa "$bin" op sdpa --in "$work/qkv.safetensors" --out "$work/out.safetensors" --need-weights --threads 1
check plot_heatmap "$bin" plot heatmap --in "$work/out.safetensors" --tensor weights --index 0,1 --out "$work/w.png"
check lm "$bin" lm train --data "$work/imdb" --d-model 16 --layers 1 --heads 2 --context 16 --vocab 300 \
  --batch-size 2 --max-steps 3 --val-tokens 32 --threads 1 --checkpoint "$work/lm.safetensors"
check lm_generate "$bin" lm generate --checkpoint "$work/lm.safetensors" --max-new-tokens 6 --threads 1 a
check bench "$bin" bench sdpa --L 32 --B 1 --H 2 --d 8 --runs 1 --warmup 0 --threads 1
check tour "$bin" tour 002/3.2 002/3.3 003/nw-train --out-dir "$work" --save "$work"

# the command table: every command attn --help lists has a run above (its name, or name_...)
for cmd in $("$bin" --help | sed -n '/^commands:/,/^$/p' | awk 'NF > 1 && $1 ~ /^[a-z]+$/ {print $1}'); do
  if ! printf '%s\n' "${summary[@]}" | grep -qE "^${cmd}( |_)"; then
    echo "valgrind: FAIL: attn $cmd has no run here (add one above)"
    failed=$((failed + 1))
  fi
done

printf '%s\n' "${summary[@]}"
echo "valgrind: $passed passed, $failed failed"
((failed == 0))
