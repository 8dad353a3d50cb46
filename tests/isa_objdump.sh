#!/usr/bin/env bash
# A portable build (ATTN_NATIVE off) runs on any x86-64-v2 CPU: outside the kernels built per
# level, no object of the library or the program holds an instruction above x86-64-v2 (AVX and
# later: VEX or EVEX encodings, ymm/zmm/k registers, BMI1/2, LZCNT, MOVBE). The avx2 level's
# kernels must show some (so the check can fail). Usage: tests/isa_objdump.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: tests/isa_objdump.sh BUILD_DIR}
command -v objdump >/dev/null || { echo "isa_objdump: objdump not found: skipped"; exit 77; }
# mnemonics of v3/v4 instructions, and registers only AVX gives
above='^(v[a-z0-9]+|andn|bextr|blsi|blsmsk|blsr|bzhi|mulx|pdep|pext|rorx|sarx|shlx|shrx|lzcnt|tzcnt|movbe)$'
count_above() { # object: instructions above the baseline
  objdump -d --no-show-raw-insn "$1" |
    awk -F'\t' 'NF >= 2 { split($2, w, " "); m = w[1]; if (m ~ /^(verr|verw)$/) next;
                          if (m ~ /'"$above"'/ || $0 ~ /%[yz]mm|%k[0-7]/) n++ } END { print n + 0 }'
}
baseline_dirs=(CMakeFiles/attn_objects.dir CMakeFiles/attn_kernels_baseline.dir)
# the libraries beside the core and the program, in the builds that have them (ATTN_DATA, ATTN_PLOT)
for dir in CMakeFiles/attn_data_objects.dir CMakeFiles/attn_plot_objects.dir cli/CMakeFiles/attn_cli.dir \
           cli/CMakeFiles/attn_cli_peak_baseline.dir; do
  [[ -d "$build/$dir" ]] && baseline_dirs+=("$dir")
done
checked=0 bad=0
for dir in "${baseline_dirs[@]}"; do
  [[ -d "$build/$dir" ]] || { echo "isa_objdump: $build/$dir missing (a build with ATTN_NATIVE?)"; exit 1; }
  while IFS= read -r -d '' obj; do
    n=$(count_above "$obj")
    checked=$((checked + 1))
    if ((n > 0)); then echo "isa_objdump: $obj: $n instructions above x86-64-v2"; bad=$((bad + 1)); fi
  done < <(find "$build/$dir" -name '*.o' -print0)
done
level_hits=$(find "$build/CMakeFiles/attn_kernels_avx2.dir" -name '*.o' -print0 | xargs -0 -n1 bash -c \
             "$(declare -p above); $(declare -f count_above); count_above \"\$0\"" | awk '{s += $1} END {print s + 0}')
echo "isa_objdump: $checked baseline objects, $bad with instructions above x86-64-v2; the avx2 level's kernels: $level_hits"
((checked > 50 && bad == 0 && level_hits > 1000))
