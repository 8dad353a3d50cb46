#!/usr/bin/env bash
# Builds the libFuzzer targets into build-fuzz/ (or $1): fuzz_safetensors, fuzz_tokenizer,
# fuzz_imdb, fuzz_parallel, fuzz_op, each with AddressSanitizer and UndefinedBehaviorSanitizer, against
# the library sources. Needs clang and libclang-rt-14-dev (scripts/setup.sh installs them).
# Run one:  build-fuzz/fuzz_safetensors -max_total_time=600 build-fuzz/corpus/safetensors fuzz/corpus/safetensors
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-fuzz}
cc=${CC:-clang}
command -v "$cc" >/dev/null || { echo "fuzz/build.sh: $cc not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
cmake -S fuzz -B "$out" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$out" -j"$(nproc)"
