#!/usr/bin/env bash
# Installs the dependencies, builds and runs every test:
#   1. release build (build/), the whole suite
#   2. AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/), the whole suite
#   3. OpenMP off (build-noomp/), the whole suite
#   4. install into a temporary prefix and build examples/ against it with pkg-config
# Ends with one line "N passed, N failed" over all of them; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
jobs=$(nproc)
passed=0
failed=0

suite() { # name, cmake options...
  local name=$1; shift
  echo "== suite $name"
  local build
  if ! build=$(cmake -S . -B "build$name" "$@" 2>&1 && cmake --build "build$name" -j"$jobs" 2>&1); then
    echo "$build" | tail -30; echo "suite $name: build failed"; failed=$((failed + 1)); return
  fi
  echo "$build" | grep -E "warning:" || true
  local log
  log=$(cd "build$name" && ctest --output-on-failure -j2 2>&1)
  echo "$log" | grep -E "tests passed|Failed|\*\*\*|FAIL" || true
  local total bad
  total=$(echo "$log" | sed -nE 's/.*tests failed out of ([0-9]+).*/\1/p')
  bad=$(echo "$log" | sed -nE 's/.* ([0-9]+) tests failed out of.*/\1/p')
  if [[ -z "$total" ]]; then echo "suite $name: ctest did not run"; failed=$((failed + 1)); return; fi
  passed=$((passed + total - bad)); failed=$((failed + bad))
}

suite "" -DCMAKE_BUILD_TYPE=Release
suite "-asan" -DCMAKE_BUILD_TYPE=Debug -DATTN_SANITIZE=ON
suite "-noomp" -DCMAKE_BUILD_TYPE=Release -DATTN_OPENMP=OFF

echo "== installed library + pkg-config example"
prefix=$(mktemp -d)
if cmake --install build --prefix "$prefix" >/dev/null &&
   pcdir=$(dirname "$(find "$prefix" -name attn.pc | head -1)") &&
   export PKG_CONFIG_PATH="$pcdir" &&
   cc -std=c11 -Wall -Wextra -Werror examples/train_tiny.c -o "$prefix/train_tiny" $(pkg-config --cflags --libs attn) -lm &&
   [[ "$(pkg-config --modversion attn)" == "$(sed -nE 's/^project\(attn VERSION ([0-9.]+).*/\1/p' CMakeLists.txt)" ]] &&
   LD_LIBRARY_PATH="$(pkg-config --variable=libdir attn)" "$prefix/train_tiny"; then
  passed=$((passed + 1))
else
  echo "example against the installed library: FAILED"; failed=$((failed + 1))
fi
rm -rf "$prefix"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
