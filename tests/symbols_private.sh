#!/usr/bin/env bash
# Every global symbol a library defines is its API (attn_...) or private with the private
# prefix (attn__...), so that a program linking the static libraries may name its own functions
# anything else (a user's plot_text or transformer_init). Usage: symbols_private.sh LIBRARY...
# (.a: the archive's defined globals; .so: its dynamic symbol table). Lists every offender and
# exits 1 when there is one.
set -euo pipefail
[[ $# -gt 0 ]] || { echo "usage: $0 LIBRARY..." >&2; exit 2; }
offenders=0
for lib in "$@"; do
  case "$lib" in
    *.a) symbols=$(nm -g --defined-only "$lib" | awk 'NF == 3 {print $3}') ;;
    # the linker's own markers of a shared object, defined in every one
    *) symbols=$(nm -D --defined-only "$lib" | awk 'NF == 3 {print $3}' |
                 grep -vxE '_init|_fini|_edata|_end|__bss_start' || true) ;;
  esac
  count=$(printf '%s\n' "$symbols" | grep -c . || true)
  # AddressSanitizer's ODR indicator of a global X is __odr_asan.X: X is what is judged
  bad=$(printf '%s\n' "$symbols" | sed 's/^__odr_asan\.//' | grep -v '^attn_' | grep . || true)
  if [[ $count -eq 0 ]]; then
    echo "$lib: no global symbols read"
    offenders=$((offenders + 1))
  elif [[ -n "$bad" ]]; then
    echo "$lib: global symbols outside attn_ / attn__ (make them static or prefix them attn__):"
    printf '  %s\n' $bad
    offenders=$((offenders + $(printf '%s\n' "$bad" | wc -l)))
  else
    echo "$lib: $count global symbols, all attn_ or attn__"
  fi
done
[[ $offenders -eq 0 ]]
