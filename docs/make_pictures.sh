#!/usr/bin/env bash
# Regenerates the pictures in docs/ from the command line (the README shows them):
#   nw_fit.png, nw_loss.png      attn nw
#   classifier_attention.png     attn classify explain (after a short training on the mini set)
#   sdpa_weights_heads.png       attn op sdpa --need-weights, drawn by attn plot heatmap --grid
#   cross_attention.png          attn translate translate (needs translator.safetensors from
#                                attn translate train; skipped when it is absent; the README's
#                                is of the 58-minute run, with --average of its last 5 epochs)
#   translate_loss.png           is that run's --plot-loss (not remade here: one hour of training)
# Usage: bash docs/make_pictures.sh   (from the repository root, after building build/)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/attn
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

$bin nw --plot docs/nw_fit.png --plot-loss docs/nw_loss.png >/dev/null

$bin classify train --epochs 5 --checkpoint "$tmp/cls.safetensors" --plot-loss docs/classifier_loss.png
$bin classify explain --checkpoint "$tmp/cls.safetensors" --out docs/classifier_attention.png \
  "This movie is absolutely fantastic and captivating from start to finish"

# attention weights of one head stack, from the golden causal SDPA case
$bin op sdpa --in tests/golden/attn_sdpa_causal.safetensors --out "$tmp/sdpa.safetensors" --causal --need-weights >/dev/null
$bin plot heatmap --in "$tmp/sdpa.safetensors" --tensor weights --index 0 --grid --cmap reds --range unit \
  --title "causal attention, one panel per head" --out docs/sdpa_weights_heads.png

if [[ -f translator.safetensors ]]; then
  $bin translate translate --checkpoint translator.safetensors --out docs/cross_attention.png \
    "A man in an orange hat starring at something."
fi
