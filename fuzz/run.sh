#!/usr/bin/env bash
# Builds the fuzz targets (fuzz/build.sh) and runs each for SECONDS (default 30), all at once,
# from the committed seeds (fuzz/corpus/<target>) plus the corpus grown so far
# (build-fuzz/corpus/<target>, not committed). A crash, a sanitizer report, a leak or a broken
# invariant is a failure: the input is saved as build-fuzz/artifacts/<target>-crash-<sha1>;
# reproduce it with build-fuzz/fuzz_<target> <that file>, and add it to fuzz/corpus/<target>/
# once fixed. Prints libFuzzer's last stats line per target (execs/s, cov: edges, ft: features).
# Usage: fuzz/run.sh [SECONDS] [TARGET...]   Ends with "fuzz: N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
seconds=${1:-30}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(safetensors tokenizer imdb parallel op)
out=build-fuzz
mkdir -p "$out"
if ! bash fuzz/build.sh "$out" >"$out/build.log" 2>&1; then
  tail -20 "$out/build.log"; echo "fuzz: the targets did not build"; echo "fuzz: 0 passed, ${#targets[@]} failed"; exit 1
fi
grep -E "warning:" "$out/build.log" || true
mkdir -p "$out/artifacts"
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
pids=()
for t in "${targets[@]}"; do
  mkdir -p "$out/corpus/$t"
  quiet=() # attn op prints a message per refused input: its stderr is closed (libFuzzer keeps its own)
  [[ $t == op ]] && quiet=(-close_fd_mask=2)
  "$out/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "${quiet[@]}" \
    -artifact_prefix="$out/artifacts/$t-" "$out/corpus/$t" "fuzz/corpus/$t" >"$out/$t.log" 2>&1 &
  pids+=($!)
done
passed=0
failed=0
for i in "${!targets[@]}"; do
  t=${targets[i]}
  wait "${pids[i]}"
  rc=$?
  stats=$(grep -E "^#[0-9]+.*(DONE|pulse|NEW|REDUCE)" "$out/$t.log" | tail -1 | sed -E 's/^#([0-9]+)\s+[A-Z]+\s+/\1 execs, /')
  execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$out/$t.log")
  rate=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+)/\1/p' "$out/$t.log")
  if ((rc == 0)) && ! grep -qE "ERROR: |runtime error:|invariant broken" "$out/$t.log"; then
    passed=$((passed + 1))
    echo "fuzz_$t: ${seconds} s, ${execs:-?} runs, ${rate:-?} execs/s; $stats"
  else
    failed=$((failed + 1))
    echo "fuzz_$t: FAILED (exit $rc); $stats"
    grep -E "ERROR: |runtime error:|invariant broken|SUMMARY|Test unit written" "$out/$t.log" | head -8
  fi
done
echo "fuzz: $passed passed, $failed failed"
((failed == 0))
