#!/usr/bin/env bash
# The core library and its tests built for another Linux architecture with Debian's cross
# compilers and multiarch OpenBLAS (cmake/cross-linux.cmake), and the ctest suite run under
# qemu-user at one thread: qemu 7.2 hangs a team of two OpenMP threads, with or without attn, so
# OMP_THREAD_LIMIT=1 caps every team (tests that ask for two threads run on one). s390x programs
# are linked statically, without OpenMP: this qemu aborts a dynamically linked s390x program at
# its start ("stack smashing detected", a hello world too). Then the safetensors file st_bytes
# writes there must equal, byte for byte, the one this host's build/ writes.
#   bash scripts/cross_test.sh TRIPLE [QEMU_CPU] [CTEST_ARGS...]
#     TRIPLE: aarch64-linux-gnu, s390x-linux-gnu, ...; QEMU_CPU: qemu's -cpu model (default its own)
# Needs: dpkg --add-architecture ARCH; apt-get install qemu-user gcc-TRIPLE libopenblas-dev:ARCH
# The build goes to build-ARCH/; ctest's summary, then the comparison, are the last lines.
set -uo pipefail
cd "$(dirname "$0")/.."
triple=${1:?usage: bash scripts/cross_test.sh TRIPLE [QEMU_CPU] [CTEST_ARGS...]}
cpu=${2:-}
shift $(($# >= 2 ? 2 : 1))
arch=${triple%%-*}
build=build-$arch
command -v "$triple-gcc" >/dev/null || { echo "cross_test: no $triple-gcc (apt-get install gcc-$triple)"; exit 2; }
command -v "qemu-$arch" >/dev/null || { echo "cross_test: no qemu-$arch (apt-get install qemu-user)"; exit 2; }
static=()
if [[ $arch == s390x ]]; then
  blas=/usr/lib/$triple/openblas-pthread/libopenblas.a
  static=(-DCMAKE_EXE_LINKER_FLAGS=-static -DATTN_OPENMP=OFF "-DBLAS_LIBRARIES=$blas;-lpthread;-lm")
fi
ATTN_CROSS=$triple cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE=cmake/cross-linux.cmake -DCMAKE_BUILD_TYPE=Release \
  -DATTN_GEMM=openblas -DATTN_DATA=OFF -DATTN_PLOT=OFF -DATTN_MPI=OFF "${static[@]}" >/dev/null || exit 1
cmake --build "$build" -j"$(nproc)" >/dev/null || { cmake --build "$build" 2>&1 | grep -E "error|Error" | head; exit 1; }
export OMP_NUM_THREADS=1 OMP_THREAD_LIMIT=1 OPENBLAS_NUM_THREADS=1
[[ -n $cpu ]] && export QEMU_CPU=$cpu
ctest --test-dir "$build" --timeout 600 "$@"
code=$?
if [[ -x build/st_bytes ]]; then
  tmp=$(mktemp -d)
  build/st_bytes "$tmp/host.safetensors" >/dev/null &&
    "qemu-$arch" -L "/usr/$triple" "$build/st_bytes" "$tmp/$arch.safetensors" >/dev/null &&
    cmp "$tmp/host.safetensors" "$tmp/$arch.safetensors" &&
    echo "cross_test: st_bytes wrote the same $(stat -c %s "$tmp/host.safetensors") bytes here and on $arch" ||
    { echo "cross_test: st_bytes: the $arch file differs from this host's"; code=1; }
  rm -rf "$tmp"
fi
exit $code
