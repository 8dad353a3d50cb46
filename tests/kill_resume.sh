#!/usr/bin/env bash
# Checkpoints survive crashes: attn classify train (a tiny aclImdb set, a checkpoint after every
# step) is killed with SIGKILL at >= 20 random moments - while loading data, mid-step, inside a
# checkpoint write - and resumed each time. After every kill the checkpoint on disk must load
# (attn classify eval exits 0); every step loss printed by any of the killed runs must equal the
# uninterrupted run's loss of that step, bit for bit (--log-steps prints 9 digits); and the run
# resumed to the end must print the same test accuracy and leave the same parameters and Adam
# state in its final checkpoint (sha256 of the tensor bytes) as the uninterrupted one (same seed,
# one thread).
# Usage: tests/kill_resume.sh [ATTN_BIN] [KILLS]   (default build/attn, 24 kills; KILL_SEED=S
# changes the kill moments, KILL_KEEP=1 keeps the logs and checkpoints)
# Ends with "kill_resume: N passed, N failed" (one check per kill, plus the comparisons).
set -u
cd "$(dirname "$0")/.." || exit 1
root=$PWD
bin=${1:-build/attn}
[[ $bin == /* ]] || bin=$root/$bin
kills=${2:-24}
[[ -x $bin ]] || { echo "kill_resume: no program at $bin"; echo "kill_resume: 0 passed, 1 failed"; exit 1; }
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
source tests/robustness/lib.sh
work=$(mktemp -d /tmp/attn-kill.XXXXXX)
pid=""
cleanup() {
  [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null
  if [[ -n ${KILL_KEEP:-} ]]; then echo "kill_resume: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
make_imdb "$work/imdb" 40 10
args=(classify train --data "$work/imdb" --epochs 16 --batch-size 4 --max-len 32 --embed-dim 16
      --heads 2 --hidden 32 --threads 1 --seed 3 --checkpoint-every 1 --log-steps)
passed=0
failed=0
fail() { echo "kill_resume: FAIL: $*"; failed=$((failed + 1)); }

# the uninterrupted run
t0=$(date +%s.%N)
if ! "$bin" "${args[@]}" --checkpoint "$work/ref.safetensors" >"$work/ref.log" 2>"$work/ref.err"; then
  cat "$work/ref.err"; fail "the uninterrupted run failed"
  echo "kill_resume: $passed passed, $failed failed"; exit 1
fi
t1=$(date +%s.%N)
total=$(grep -c '^step ' "$work/ref.log")
ref_acc=$(grep '^test accuracy' "$work/ref.log")
# the tensors of a checkpoint (parameters and Adam state): its bytes after the header. (The
# metadata may differ: a run resumed from "epoch 8, step 20" ends there, the same place as the
# uninterrupted run's "epoch 9, step 0".)
tensors_sum() { tail -c +$((9 + $(od -An -t u8 -N8 "$1"))) "$1" | sha256sum; }
ref_sum=$(tensors_sum "$work/ref.safetensors")
declare -A ref_loss
while read -r _ n _ _ _ _ _ loss; do ref_loss[$n]=$loss; done < <(grep '^step ' "$work/ref.log")
echo "kill_resume: uninterrupted run: $total steps in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s, $ref_acc"

# kill moments: mostly 0 to 4 steps after the run's first step (then 0-19 ms later, so inside a
# step or its checkpoint write), sometimes a few ms after the start (data loading, vocabulary
# write); each run resumes where the last one's checkpoint stands
RANDOM=${KILL_SEED:-7}
ck=$work/run.safetensors
done_kills=0 during_write=0 startup_kills=0 cycle=0
# polling without forking (so a step is not over before we look): the first and last step
# number in a log into REPLY, and a 2 ms sleep on a pipe nobody writes
steps_in() { # log -> first, last
  local -a lines=()
  local l k
  first="" last=""
  [[ -f $1 ]] || return 0
  mapfile -t lines < "$1"
  for ((k = 0; k < ${#lines[@]}; k++)); do
    l=${lines[k]}
    [[ $l == "step "* ]] || continue
    l=${l#step }
    [[ -z $first ]] && first=${l%% *}
    last=${l%% *}
  done
}
exec {nap}<> <(:)
while ((done_kills < kills)); do
  cycle=$((cycle + 1))
  ((cycle > 4 * kills)) && { fail "could not kill $kills times (training ends too soon)"; break; }
  resume=()
  [[ -e $ck ]] && resume=(--resume)
  log=$work/run.$cycle.log
  "$bin" "${args[@]}" --checkpoint "$ck" "${resume[@]}" >"$log" 2>"$work/run.$cycle.err" &
  pid=$!
  ahead=$((RANDOM % 5))
  target="+$ahead"
  if ((RANDOM % 6 == 0)); then
    sleep "0.00$((RANDOM % 10))"
    startup_kills=$((startup_kills + 1))
  else
    # wait until the run is `ahead` steps past its first step (or has ended)
    while kill -0 "$pid" 2>/dev/null; do
      steps_in "$log"
      if [[ -n $first ]]; then
        target=$((first + ahead))
        ((last >= target)) && break
      fi
      read -rt 0.002 -u "$nap" || :
    done
    sleep "0.0$((RANDOM % 16 / 10))$((RANDOM % 10))"
  fi
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  rc=$?
  pid=""
  if ((rc != 137)); then
    # it ended by itself: fine only if it finished, and only counts as a run, not a kill
    ((rc == 0)) || { cat "$work/run.$cycle.err"; fail "run $cycle exited $rc"; }
    [[ -e $ck ]] && ! grep -q '^test accuracy' "$log" && fail "run $cycle exited 0 without finishing"
    if grep -q '^test accuracy' "$log"; then # start over to have more moments to kill
      echo "kill_resume: run $cycle (${resume[*]:-fresh}, kill at step $target) finished before its kill; starting again from scratch"
      rm -f "$ck" "$ck.vocab"
    fi
    continue
  fi
  done_kills=$((done_kills + 1))
  compgen -G "$work/run.safetensors.tmp.*" >/dev/null && during_write=$((during_write + 1))
  rm -f "$work"/run.safetensors.tmp.* "$work"/run.safetensors.vocab.tmp
  if [[ ! -e $ck ]]; then
    passed=$((passed + 1)) # killed before the first checkpoint: nothing to load, nothing half-written
  elif "$bin" classify eval --data "$work/imdb" --checkpoint "$ck" >"$work/eval.log" 2>&1; then
    passed=$((passed + 1))
  else
    cat "$work/eval.log"; fail "after kill $done_kills (step ${target}) the checkpoint does not load"
  fi
done

# resume to the end
resume=()
[[ -e $ck ]] && resume=(--resume)
if ! "$bin" "${args[@]}" --checkpoint "$ck" "${resume[@]}" >"$work/final.log" 2>"$work/final.err"; then
  cat "$work/final.err"; fail "the final resumed run failed"
fi
cat "$work"/run.*.log "$work/final.log" > "$work/all.log"
mismatch=0 seen=0
declare -A got
while read -r _ n _ _ _ _ _ loss; do
  [[ -z ${loss:-} ]] && continue
  got[$n]=1
  seen=$((seen + 1))
  [[ ${ref_loss[$n]:-} == "$loss" ]] || { mismatch=$((mismatch + 1)); echo "kill_resume: step $n: loss $loss, uninterrupted ${ref_loss[$n]:-none}"; }
done < <(grep -E '^step [0-9]+ \(epoch [0-9]+, batch [0-9]+/[0-9]+\): loss [-0-9.e+na]+$' "$work/all.log")
((mismatch == 0)) && passed=$((passed + 1)) || fail "$mismatch of $seen printed step losses differ from the uninterrupted run"
((${#got[@]} == total)) && passed=$((passed + 1)) || fail "only ${#got[@]} of $total steps were printed"
final_acc=$(grep '^test accuracy' "$work/final.log")
[[ $final_acc == "$ref_acc" ]] && passed=$((passed + 1)) || fail "final '$final_acc' vs uninterrupted '$ref_acc'"
[[ $(tensors_sum "$ck") == "$ref_sum" ]] && passed=$((passed + 1)) || fail "the final checkpoint's tensors differ from the uninterrupted run's"
# (a kill inside a write leaves a named temporary file only where the file system lacks O_TMPFILE)
echo "kill_resume: $done_kills SIGKILLs in $cycle runs ($startup_kills at startup, $during_write left a named temporary file);" \
     "$seen step losses printed across the runs, $mismatch differ; final: $final_acc"
echo "kill_resume: $passed passed, $failed failed"
((failed == 0))
