#!/usr/bin/env bash
# The core library and its tests built for another Linux architecture with Debian's cross
# compilers and multiarch OpenBLAS (cmake/cross-linux.cmake), and the ctest suite run under
# qemu-user, once per kernel level the architecture has (each with a qemu -cpu model that has it),
# at one thread: qemu 7.2 hangs a process whose threads wait on one another (an OpenMP team of
# two, with or without attn), so OMP_THREAD_LIMIT=1 caps every team and attn's thread counts
# (test_threads, which needs two threads at once, skips itself). s390x programs are linked
# statically, without OpenMP: this qemu aborts a dynamically linked s390x program at its start
# ("stack smashing detected", a hello world too). Then the safetensors file st_bytes writes there
# must equal, byte for byte, the one this host's build/ writes (when build/ has it).
#   [CROSS_JOBS=N] bash scripts/cross_test.sh TRIPLE [CTEST_ARGS...]
#     TRIPLE: aarch64-linux-gnu or s390x-linux-gnu (another: one run at qemu's default CPU)
#     CROSS_JOBS: tests at once (default: the cores; the build always uses them all)
# Needs: dpkg --add-architecture ARCH; apt-get install qemu-user gcc-TRIPLE libopenblas-dev:ARCH
# The build goes to build-ARCH/. Ends with "cross_test: N passed, N failed" over every run (a
# skipped test counts as neither); exit status 2 when a tool is missing, 1 on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
triple=${1:?usage: bash scripts/cross_test.sh TRIPLE [CTEST_ARGS...]}
shift
arch=${triple%%-*}
build=build-$arch
command -v "$triple-gcc" >/dev/null || { echo "cross_test: no $triple-gcc (apt-get install gcc-$triple)"; exit 2; }
command -v "qemu-$arch" >/dev/null || { echo "cross_test: no qemu-$arch (apt-get install qemu-user)"; exit 2; }
# The runs: label ; qemu -cpu model ; ATTN_CPU_ISA ; the tests left out ; the tests run (all when
# empty): fields apart by ";", since the regular expressions hold "|". aarch64: each level, and
# SVE at two lengths (the sve level's products are vector-length agnostic); qemu's max CPU has
# BF16 and SVE, so it runs at neon_bf16 uncapped and at sve capped.
# The whole suite at the first, and at the others all but the build checks and the file-format
# tests, which no kernel level changes, and the differential test's 300 draws (130 s emulated; the
# attention tests of every feature run at each level); at the second SVE length only the tests of
# the tile products, the one code that SVE's length changes.
sve_length_tests="test_kernels_tile|test_kernels_gemm|test_cpu_isa|test_attention|test_golden_attention|test_mha"
skip_at_other_levels="symbols_private|layer_includes|format_current|file_cycles|isa_baseline_objects|state_dict_roundtrip|test_safetensors|test_checkpoint|test_load_once|test_params_load|test_attention_differential"
case $arch in
  aarch64) runs=("neon_bf16 (BFDOT, SVE present);max;;"
                 "sve, 512-bit vectors;max;sve;$skip_at_other_levels"
                 "sve, 128-bit vectors;max,sve-default-vector-length=16;sve;$skip_at_other_levels;$sve_length_tests"
                 "neon (Neoverse N1: no SVE, no BF16);neoverse-n1;;$skip_at_other_levels"
                 "baseline (portable vectors);max;baseline;$skip_at_other_levels") ;;
  *) runs=("baseline;;;") ;;
esac
static=()
if [[ $arch == s390x ]]; then
  blas=/usr/lib/$triple/openblas-pthread/libopenblas.a
  static=(-DCMAKE_EXE_LINKER_FLAGS=-static -DATTN_OPENMP=OFF "-DBLAS_LIBRARIES=$blas;-lpthread;-lm")
fi
export ATTN_CROSS=$triple # cmake/cross-linux.cmake reads it at every configure
log=$(cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE=cmake/cross-linux.cmake -DCMAKE_BUILD_TYPE=Release \
  -DATTN_GEMM=openblas -DATTN_DATA=OFF -DATTN_PLOT=OFF -DATTN_MPI=OFF "${static[@]}" 2>&1 &&
  cmake --build "$build" -j"$(nproc)" 2>&1) || { echo "$log" | grep -E "error|Error" | head; echo "cross_test: $arch: build failed"; echo "cross_test: 0 passed, 1 failed"; exit 1; }
export OMP_NUM_THREADS=1 OMP_THREAD_LIMIT=1 OPENBLAS_NUM_THREADS=1
passed=0 failed=0
for run in "${runs[@]}"; do
  IFS=';' read -r label cpu isa skip only <<<"$run"
  out=$(cd "$build" && env ${cpu:+QEMU_CPU=$cpu} ${isa:+ATTN_CPU_ISA=$isa} ctest --output-on-failure -j"${CROSS_JOBS:-$(nproc)}" \
        ${skip:+-E "$skip"} ${only:+-R "$only"} "$@" 2>&1)
  total=$(echo "$out" | sed -nE 's/.*tests failed out of ([0-9]+).*/\1/p')
  bad=$(echo "$out" | sed -nE 's/.* ([0-9]+) tests failed out of.*/\1/p')
  skipped=$(echo "$out" | grep -cE "\*\*\*Skipped")
  echo "$out" | grep -E "\*\*\*Failed|\*\*\*Timeout|\*\*\*Skipped|FAIL " | sed "s/^/  /"
  if [[ -z $total ]]; then echo "cross_test: $arch, $label: ctest did not run"; failed=$((failed + 1)); continue; fi
  echo "cross_test: $arch, $label${cpu:+ (qemu -cpu $cpu)}: $((total - bad - skipped)) passed, $bad failed, $skipped skipped ($(echo "$out" | sed -nE 's/^Total Test time \(real\) = +([0-9.]+) sec/\1 s/p'))"
  passed=$((passed + total - bad - skipped)); failed=$((failed + bad))
done
if [[ -x build/st_bytes ]]; then # the same file, byte for byte
  tmp=$(mktemp -d)
  if build/st_bytes "$tmp/host.safetensors" >/dev/null &&
     "qemu-$arch" -L "/usr/$triple" "$build/st_bytes" "$tmp/$arch.safetensors" >/dev/null &&
     cmp "$tmp/host.safetensors" "$tmp/$arch.safetensors"; then
    echo "cross_test: st_bytes wrote the same $(stat -c %s "$tmp/host.safetensors") bytes here and on $arch"
    passed=$((passed + 1))
  else
    echo "cross_test: st_bytes: the $arch file differs from this host's"; failed=$((failed + 1))
  fi
  rm -rf "$tmp"
fi
echo "cross_test: $passed passed, $failed failed"
((failed == 0))
