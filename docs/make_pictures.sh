#!/usr/bin/env bash
# Regenerates the pictures in docs/ from the command line (the README and the tutorials show them):
#   nw_fit.png, nw_loss.png      attn nw
#   sdpa_weights_heads.png       attn op sdpa --need-weights, drawn by attn plot heatmap --grid
#   tour/*.png                   attn tour (docs/make_tutorial.sh also makes them, with the text)
#   classifier_attention.png     what scripts/run.sh draws: attn classify train (5 epochs on the
#                                mini set, the defaults), then attn classify explain on the
#                                tutorial's sample sentence; classifier_loss.png is its loss
#   cross_attention.png          attn translate translate (needs translator.safetensors from
#                                attn translate train; skipped when it is absent; the README's
#                                is of the 58-minute run, with --average of its last 5 epochs)
#   translate_loss.png           is that run's --plot-loss (not remade here: one hour of training)
# Usage: bash docs/make_pictures.sh [ATTN_BIN]           remake them (from any folder)
#        bash docs/make_pictures.sh --check [ATTN_BIN]   remake those that need no training into
#            a scratch folder and compare each with the copy in docs/ (tests/png_same.py): exit 1
#            when one differs. The ctest pictures_current runs this.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
check=0
if [[ ${1:-} == --check ]]; then check=1; shift; fi
bin=${1:-build/attn}
[[ $bin == /* ]] || bin=$root/$bin
[[ -x $bin ]] || { echo "make_pictures: no program at $bin" >&2; exit 2; }
if ((check)) && [[ -n ${ATTN_CPU_ISA:-}${ONEDNN_MAX_CPU_ISA:-} ]]; then
  echo "make_pictures: --check skipped under a capped ATTN_CPU_ISA or ONEDNN_MAX_CPU_ISA: it runs once, at the default level"
  exit 77
fi
export LC_ALL=C.UTF-8 # the tour's notes and titles in English, whatever the locale
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=docs
((check)) && out=$tmp/docs && mkdir -p "$out/tour"

"$bin" nw --plot "$out/nw_fit.png" --plot-loss "$out/nw_loss.png" >/dev/null

# attention weights of one head stack, from the golden causal SDPA case
"$bin" op sdpa --in tests/golden/attn_sdpa_causal.safetensors --out "$tmp/sdpa.safetensors" --causal --need-weights >/dev/null
"$bin" plot heatmap --in "$tmp/sdpa.safetensors" --tensor weights --index 0 --grid --cmap reds --range unit \
  --title "causal attention, one panel per head" --out "$out/sdpa_weights_heads.png" >/dev/null

(cd "$out/tour" && "$bin" tour --data "$root/data/aclImdb_mini" >/dev/null)

if ((check)); then
  bad=0
  for f in "$out"/*.png "$out"/tour/*.png; do
    name=${f#"$out"/}
    if ! python3 tests/png_same.py "docs/$name" "$f"; then
      echo "make_pictures: docs/$name is not what its command draws now (bash docs/make_pictures.sh)" >&2
      bad=1
    fi
  done
  for f in docs/tour/*.png; do
    [[ -e $out/tour/${f#docs/tour/} ]] || { echo "make_pictures: $f: no step draws it now" >&2; bad=1; }
  done
  ((bad == 0)) && echo "make_pictures: the $(ls "$out"/*.png "$out"/tour/*.png | wc -l) pictures that need no training are current"
  exit $bad
fi

"$bin" classify train --checkpoint "$tmp/cls.safetensors" --plot-loss docs/classifier_loss.png
"$bin" classify explain --checkpoint "$tmp/cls.safetensors" --out docs/classifier_attention.png \
  "This movie is absolutely fantastic and captivating from start to finish"

if [[ -f translator.safetensors ]]; then
  "$bin" translate translate --checkpoint translator.safetensors --out docs/cross_attention.png \
    "A man in an orange hat starring at something."
fi
