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
# the layout does not depend on the kernel level: one run, not one per level of scripts/test.sh
[[ -n ${ATTN_CPU_ISA:-}${ONEDNN_MAX_CPU_ISA:-} ]] && { echo "format_check: run once, without ATTN_CPU_ISA: skipped"; exit 77; }
tool=$(command -v clang-format-14 || command -v clang-format) || { echo "format_check: clang-format not found: skipped"; exit 77; }
[[ $("$tool" --version) == *"version 14."* ]] || { echo "format_check: $("$tool" --version) is not 14: skipped"; exit 77; }
files=()
while IFS= read -r f; do
  head -3 "$f" | grep -qi 'generated' && head -3 "$f" | grep -q 'Do not edit' && continue
  files+=("$f")
done < <(find src cli include tests bench examples fuzz tools -name '*.[ch]' 2>/dev/null | sort)
if ((fix)); then "$tool" -i "${files[@]}"; exit; fi
# one clang-format for every file: it names each file it would change in a warning line
unformatted=$("$tool" --dry-run "${files[@]}" 2>&1 | sed -nE 's/^([^:]+):[0-9]+:[0-9]+: (warning|error): code should be clang-formatted.*/\1/p' | sort -u)
for f in $unformatted; do echo "format_check: $f differs from clang-format's layout (bash tests/format_check.sh --fix)"; done
bad=$(printf '%s' "$unformatted" | grep -c . || true)
echo "format_check: ${#files[@]} files, $bad not formatted"
((bad == 0))
