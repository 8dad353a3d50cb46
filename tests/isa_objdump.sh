#!/usr/bin/env bash
# A portable build (ATTN_NATIVE off) runs on any CPU of its architecture: outside the kernels built
# per level above the baseline, no object of the library or the program holds an instruction above
# it, and the highest level's kernels must show some (so the check can fail).
#   x86_64: above x86-64-v2 is AVX and later (VEX or EVEX encodings, ymm/zmm/k registers, BMI1/2,
#           LZCNT, MOVBE); the avx2 level's kernels must hold them.
#   aarch64: above ARMv8.0-A is SVE (z and p registers, the vector-length instructions) and BF16
#           (BFDOT, BFMMLA, BFCVT); the baseline and neon levels must hold none, the sve level's
#           kernels must hold SVE's and the neon_bf16 level's BFDOT.
# Usage: tests/isa_objdump.sh BUILD_DIR [ARCH [OBJDUMP]]   (ARCH: x86_64, the default, or aarch64)
set -uo pipefail
build=${1:?usage: tests/isa_objdump.sh BUILD_DIR [ARCH [OBJDUMP]]}
arch=${2:-x86_64}
objdump=${3:-objdump}
command -v "$objdump" >/dev/null || { echo "isa_objdump: $objdump not found: skipped"; exit 77; }
case $arch in
  x86_64)
    # mnemonics of v3/v4 instructions, and registers only AVX gives
    above_mnemonic='^(v[a-z0-9]+|andn|bextr|blsi|blsmsk|blsr|bzhi|mulx|pdep|pext|rorx|sarx|shlx|shrx|lzcnt|tzcnt|movbe)$'
    except_mnemonic='^(verr|verw)$'
    above_operand='%[yz]mm|%k[0-7]'
    base_level=baseline floor=x86-64-v2 top_levels=(avx2:1000) ;;
  aarch64)
    above_mnemonic='^(ptrues?|whilel[eost]|cnt[bhwd]|inc[bhwd]|dec[bhwd]|addvl|addpl|rdvl|bfdot|bfmmla|bfcvtn2?)$'
    except_mnemonic='^$'
    above_operand='(^|[ ,{\[])[zp][0-9]+(\.[bhsdq]|/[mz])'
    base_level=neon floor=ARMv8.0-A top_levels=(sve:100 neon_bf16:10) ;;
  *) echo "isa_objdump: no check for $arch: skipped"; exit 77 ;;
esac
count_above() { # object: instructions above the baseline
  "$objdump" -d --no-show-raw-insn "$1" |
    awk -F'\t' -v m_re="$above_mnemonic" -v x_re="$except_mnemonic" -v o_re="$above_operand" \
      'NF >= 2 { split($2, w, " "); m = w[1]; if (m ~ x_re) next;
                 if (m ~ m_re || $3 ~ o_re || $2 ~ o_re) n++ } END { print n + 0 }'
}
baseline_dirs=(CMakeFiles/attn_objects.dir CMakeFiles/attn_kernels_baseline.dir CMakeFiles/attn_kernels_$base_level.dir)
# the libraries beside the core and the program, in the builds that have them (ATTN_DATA, ATTN_PLOT)
for dir in CMakeFiles/attn_data_objects.dir CMakeFiles/attn_plot_objects.dir cli/CMakeFiles/attn_cli.dir \
           cli/CMakeFiles/attn_cli_peak_baseline.dir; do
  [[ -d "$build/$dir" ]] && baseline_dirs+=("$dir")
done
checked=0 bad=0
for dir in $(printf '%s\n' "${baseline_dirs[@]}" | sort -u); do
  [[ -d "$build/$dir" ]] || { echo "isa_objdump: $build/$dir missing (a build with ATTN_NATIVE?)"; exit 1; }
  while IFS= read -r -d '' obj; do
    n=$(count_above "$obj")
    checked=$((checked + 1))
    if ((n > 0)); then echo "isa_objdump: $obj: $n instructions above $floor"; bad=$((bad + 1)); fi
  done < <(find "$build/$dir" -name '*.o' -print0)
done
summary="isa_objdump: $checked baseline objects, $bad with instructions above $floor"
for top in "${top_levels[@]}"; do # level:the fewest instructions above the floor its kernels must hold
  level=${top%%:*} level_hits=0
  while IFS= read -r -d '' obj; do
    level_hits=$((level_hits + $(count_above "$obj")))
  done < <(find "$build/CMakeFiles/attn_kernels_$level.dir" -name '*.o' -print0)
  summary+="; the $level level's kernels: $level_hits"
  ((level_hits > ${top#*:})) || bad=$((bad + 1))
done
echo "$summary"
((checked > 50 && bad == 0))
