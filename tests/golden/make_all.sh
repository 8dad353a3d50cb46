#!/usr/bin/env bash
# Every golden file again: each script of tests/golden/ and tests/data/ in turn, from the
# repository root, under Debian's interpreter (python3-torch 1.13 imports only there, not under a
# pyenv python3; PYTHON=... names another). The scripts rewrite their files in place; the last
# lines list what changed (on another CPU or BLAS, torch's float32 results move in their last
# bits: README.md here says which files and why the tests pass against either set).
#   bash tests/golden/make_all.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch, regex' 2>/dev/null; then
  echo "make_all: $py cannot import torch and regex (Debian's python3-torch, python3-regex)" >&2
  exit 2
fi
for script in tests/golden/make_golden*.py tests/data/make_*.py; do
  echo "== $script"
  "$py" "$script"
done
echo "== changed:"
git status --short -- tests/golden tests/data
