#!/usr/bin/env bash
# The main job: install the dependencies, build, train seed 002's self-attention classifier on
# the shipped IMDB mini set (5 epochs, the seed's hyper-parameters), print its test accuracy,
# and draw the attention heatmap of the seed's sample sentence (attention.png).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
build/attn shapes
build/attn classify train --checkpoint classifier.safetensors
build/attn classify explain --checkpoint classifier.safetensors --out attention.png \
  "This movie is absolutely fantastic and captivating from start to finish"
