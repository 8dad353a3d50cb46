#!/usr/bin/env bash
# The layers of src/ include only the private headers of the layers below them
# (docs/HACKING.md), and the program only the public headers: an include that reaches up or
# across fails. Run by the build itself (target layer_includes) and by ctest.
#   bash tests/layer_includes.sh [ROOT]          (ROOT: the tree, default the repository)
#   bash tests/layer_includes.sh --self-test     the check fails on a planted upward include
set -euo pipefail

# layer: the layers whose private headers it may include through ../<layer>/
declare -A allowed=(
  [core]=""
  [kernels]="core"
  [autograd]="core"
  [ops]="core kernels autograd"
  [nn]="core kernels autograd ops"
  [optim]="core kernels autograd"
  [io]="core autograd optim"
  [data]="core"
  [plot]="core"
  [models]="core kernels autograd ops nn"
)

check() {
  local root=$1 bad=0 file layer target
  for dir in "$root"/src/*/; do
    layer=$(basename "$dir")
    if [[ -z ${allowed[$layer]+set} ]]; then
      echo "layer_includes: src/$layer is no layer of docs/HACKING.md's table; add it there and here"
      bad=1
      continue
    fi
    while IFS=: read -r file target; do
      if [[ " ${allowed[$layer]} " != *" $target "* ]]; then
        echo "layer_includes: ${file#"$root"/} includes ../$target/: $layer may include ${allowed[$layer]:-no other layer}"
        bad=1
      fi
    done < <(grep -oE '^#include "\.\./[a-z_]+/' "$dir"*.[ch] /dev/null | sed -E 's|^([^:]+):#include "\.\./([a-z_]+)/|\1:\2|')
  done
  # the program is built on the public headers alone
  if grep -nE '^#include "\.\./' "$root"/cli/*.[ch] /dev/null; then
    echo "layer_includes: cli/ includes the library's private headers (above); it builds on attn.h, attn_data.h, attn_plot.h"
    bad=1
  fi
  return $bad
}

if [[ ${1:-} == --self-test ]]; then
  here=$(cd "$(dirname "$0")/.." && pwd)
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/src" "$tmp/cli"
  cp -r "$here/src/core" "$here/src/ops" "$tmp/src/"
  cp "$here"/cli/*.[ch] "$tmp/cli/"
  check "$tmp" > /dev/null || { echo "layer_includes self-test: the copied tree already fails"; exit 1; }
  sed -i '1i #include "../ops/gemm_internal.h"' "$tmp/src/core/arena.c" # core reaching up into ops
  if out=$(check "$tmp"); then echo "layer_includes self-test: a planted upward include passed"; exit 1; fi
  echo "$out"
  sed -i '1d' "$tmp/src/core/arena.c"
  sed -i '1i #include "../src/core/core_internal.h"' "$tmp/cli/main.c" # the program reaching into the library
  if out=$(check "$tmp"); then echo "layer_includes self-test: a private include in cli/ passed"; exit 1; fi
  echo "layer_includes self-test: both planted includes fail"
  exit 0
fi
check "${1:-$(cd "$(dirname "$0")/.." && pwd)}"
