#!/usr/bin/env bash
# The main job, for someone who has just cloned the repository (Debian 12, as root):
#   1. installs the build's Debian packages (scripts/setup.sh; nothing when they are there);
#   2. builds the library and the program in build/, showing the build's progress;
#   3. installs them into /usr/local, so that `attn` is on the PATH for the README's examples;
#   4. trains tutorial 002's self-attention classifier on the shipped IMDB mini set (5 epochs, the
#      tutorial's settings), says what its test accuracy means, and draws the attention of the
#      tutorial's sample sentence;
#   5. ends with every file it wrote (absolute paths) and three commands to try next.
# What it writes goes to runs/ in the repository (git ignores it), not the repository's root.
# Knobs, for tests and for the impatient (the defaults are what a newcomer gets):
#   ATTN_PREFIX=DIR       install there instead of /usr/local ("none": do not install)
#   ATTN_BIN=PATH         use this program and skip steps 1-3 (the docs test does)
#   ATTN_RUN_DIR=DIR      write there instead of runs/
#   ATTN_RUN_MAX_STEPS=N  stop training after N steps (the docs test: a few seconds)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
runs=${ATTN_RUN_DIR:-$root/runs}
prefix=${ATTN_PREFIX:-/usr/local}
start=$SECONDS
sentence="This movie is absolutely fantastic and captivating from start to finish"

say() { printf '\n== %s\n' "$*"; }
elapsed() { local s=$((SECONDS - start)); printf '%d min %02d s' $((s / 60)) $((s % 60)); }

if [[ -n ${ATTN_BIN:-} ]]; then
  bin=$ATTN_BIN
  [[ -x $bin ]] || { echo "run.sh: ATTN_BIN=$bin is not a program" >&2; exit 2; }
else
  say "1/4 Debian packages (scripts/setup.sh; skipped when installed)"
  bash scripts/setup.sh

  say "2/4 building build/attn (10-20 minutes on 2 cores the first time, seconds after that)"
  mkdir -p build
  if ! cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF > build/configure.log 2>&1; then
    tail -n 40 build/configure.log >&2
    echo "run.sh: cmake could not configure the build; the whole log is $root/build/configure.log" >&2
    exit 1
  fi
  # every target as it is finished, with the build's percentage; the whole log in build/build.log
  if ! cmake --build build -j"$(nproc)" 2>&1 | tee build/build.log |
       grep --line-buffered -E '^\[ *[0-9]+%\] Built target'; then
    tail -n 40 build/build.log >&2
    echo "run.sh: the build failed; the whole log is $root/build/build.log" >&2
    exit 1
  fi
  bin=$root/build/attn
  echo "built $bin in $(elapsed)"

  say "3/4 installing attn into $prefix (the program, the library, the man page, the data)"
  if [[ $prefix == none ]]; then
    echo "skipped (ATTN_PREFIX=none): run the examples as $bin, or export PATH=\"$root/build:\$PATH\""
  elif cmake --install build --prefix "$prefix" > build/install.log 2>&1; then
    echo "installed $prefix/bin/attn ($(command -v attn >/dev/null && echo 'on your PATH' ||
      echo "not on your PATH: export PATH=\"$prefix/bin:\$PATH\""))"
  else
    tail -n 5 build/install.log >&2
    echo "run.sh: could not install into $prefix (run as root, or ATTN_PREFIX=\$HOME/.local);" \
         "the examples also run as $bin" >&2
  fi
fi

steps=()
[[ -n ${ATTN_RUN_MAX_STEPS:-} ]] && steps=(--max-steps "$ATTN_RUN_MAX_STEPS")
mkdir -p "$runs"
checkpoint=$runs/classifier.safetensors
say "4/4 training tutorial 002's classifier (attn classify train)"
cat <<EOF
The model: word embeddings + learned positions + 4-head self-attention + mean pool + MLP,
4.2 million parameters, trained with Adam (lr 1e-3) for 5 epochs of 79 batches of 32 reviews,
each cut or padded to 512 tokens: the tutorial's settings. The data: the IMDB mini set shipped in
data/aclImdb_mini, 2,500 training and 1,000 test reviews, half positive and half negative.
It takes 1-2 minutes on 2 idle cores (7 on a busy machine here). A line per epoch shows the
training loss and accuracy; the checkpoint is written after every epoch.

EOF
"$bin" classify train --checkpoint "$checkpoint" --plot-loss "$runs/classifier_loss.png" "${steps[@]}" |
  tee "$runs/train.log"
accuracy=$(sed -n 's/^test accuracy: \([0-9.]*\)%.*/\1/p' "$runs/train.log")
cat <<EOF

What the accuracy means: the test accuracy is the share of the 1,000 test reviews the model
labels right; 50% is chance. On the mini set, 5 epochs reach about 68-72% (${accuracy:-?}% here;
seeds 0, 1, 2 gave 69.3%, 71.2%, 70.0%), while the training accuracy climbs past 85%: 2,500
reviews are few for 4.2 million parameters, so the model learns the training reviews by heart
(it overfits) and words it saw once or never do not carry over to new reviews. The full IMDB set
has ten times as many, 25,000 training reviews: the same model and command reach 84.2% there
(docs/results.md). To train on it (about 12 minutes on 2 cores; an 80 MB download from
https://ai.stanford.edu/~amaas/data/sentiment/), from $root:
  tar xzf aclImdb_v1.tar.gz && attn classify train --data aclImdb --checkpoint runs/imdb_full.safetensors
EOF

say "the attention of the tutorial's sample sentence (attn classify explain)"
"$bin" classify explain --checkpoint "$checkpoint" --out "$runs/attention.png" "$sentence"
echo "(each row: how much one word attends to every word, mean over the 4 heads, from the weights"
echo " the model uses; --seed-style draws the tutorial's visualize_attention without positions)"

say "done in $(elapsed); the files written"
for f in "$checkpoint" "$runs/classifier_loss.png" "$runs/attention.png" \
         "$runs/train.log"; do
  [[ -e $f ]] && printf '  %-60s %s\n' "$f" "$(du -h "$f" | cut -f1)"
done
[[ -z ${ATTN_BIN:-} ]] && printf '  %-60s %s\n' "$root/build/" "the build (attn, libattn.a, libattn.so, tests)"
cat <<EOF

Next, try (from $root):
  attn tour 002/3.3           # tutorial 002's multi-head attention, one heatmap per head (docs/tutorial.md)
  echo "a dull, lifeless film" | attn classify predict --checkpoint runs/classifier.safetensors
  attn classify explain --checkpoint runs/classifier.safetensors --out runs/mine.png "your own review"
EOF
