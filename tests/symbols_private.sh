#!/usr/bin/env bash
# Every global symbol a library defines is its API or private: attn_<name> only for a function a
# public header declares ATTN_API, everything else attn__<name> (the private prefix), so that a
# program linking the static libraries may name its own functions anything else (a user's
# plot_text or transformer_init) and no private kernel passes for API. Usage:
#   symbols_private.sh INCLUDE_DIR LIBRARY...
# (.a: the archive's defined globals; .so: its dynamic symbol table). Lists every offender and
# exits 1 when there is one.
set -euo pipefail
[[ $# -gt 1 && -d $1 ]] || { echo "usage: $0 INCLUDE_DIR LIBRARY..." >&2; exit 2; }
include=$1
shift
# the API: every name an ATTN_API declaration of the public headers gives
api=$(sed -n '/ATTN_API/,/;/p' "$include"/attn*.h | tr '\n' ' ' | grep -oE 'attn_[a-z0-9_]+ *\(' | tr -d ' (' | sort -u)
[[ -n $api ]] || { echo "symbols_private: no ATTN_API declaration read in $include"; exit 1; }
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
  judged=$(printf '%s\n' "$symbols" | sed 's/^__odr_asan\.//' | grep . || true)
  outside=$(printf '%s\n' "$judged" | grep -v '^attn_' || true)
  not_api=$(comm -23 <(printf '%s\n' "$judged" | grep '^attn_' | grep -v '^attn__' | sort -u) <(printf '%s\n' "$api") || true)
  if [[ $count -eq 0 ]]; then
    echo "$lib: no global symbols read"
    offenders=$((offenders + 1))
    continue
  fi
  if [[ -n "$outside" ]]; then
    echo "$lib: global symbols outside attn_ / attn__ (make them static or prefix them attn__):"
    printf '  %s\n' $outside
    offenders=$((offenders + $(printf '%s\n' "$outside" | wc -l)))
  fi
  if [[ -n "$not_api" ]]; then
    echo "$lib: attn_ symbols that no public header declares ATTN_API (private ones are attn__):"
    printf '  %s\n' $not_api
    offenders=$((offenders + $(printf '%s\n' "$not_api" | wc -l)))
  fi
  [[ -z "$outside" && -z "$not_api" ]] && echo "$lib: $count global symbols: the API's attn_ and the private attn__"
done
[[ $offenders -eq 0 ]]
