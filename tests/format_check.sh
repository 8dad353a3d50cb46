#!/usr/bin/env bash
# Every C file of the tree in the house style (.clang-format): clang-format 14 (Debian 12's) must
# leave each as it is. Generated files (their first lines say "generated" and "Do not edit") are
# left out. Skipped (exit 77) without clang-format 14: other versions lay code out otherwise.
#   bash tests/format_check.sh [ROOT]          (fix: the same with --fix, which rewrites the files)
set -uo pipefail
fix=0
[[ ${1:-} == --fix ]] && { fix=1; shift; }
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 1
tool=$(command -v clang-format-14 || command -v clang-format) || { echo "format_check: clang-format not found: skipped"; exit 77; }
[[ $("$tool" --version) == *"version 14."* ]] || { echo "format_check: $("$tool" --version) is not 14: skipped"; exit 77; }
files=()
while IFS= read -r f; do
  head -3 "$f" | grep -qi 'generated' && head -3 "$f" | grep -q 'Do not edit' && continue
  files+=("$f")
done < <(find src cli include tests bench examples fuzz tools -name '*.[ch]' 2>/dev/null | sort)
if ((fix)); then "$tool" -i "${files[@]}"; exit; fi
bad=0
for f in "${files[@]}"; do
  if ! "$tool" --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "format_check: $f differs from clang-format's layout (bash tests/format_check.sh --fix)"
    bad=$((bad + 1))
  fi
done
echo "format_check: ${#files[@]} files, $bad not formatted"
((bad == 0))
