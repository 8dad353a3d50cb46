#!/usr/bin/env bash
# The main job: install the dependencies, build, and run attn on the shipped data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
build/attn shapes
