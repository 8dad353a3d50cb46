#!/usr/bin/env bash
# Installs what attn needs to build and test on Debian 12 (run as root), OpenMPI included (the
# attn program trains across processes under mpirun; the library does not use it). Skips apt
# when every package is already there. The PyTorch oracle (python3-torch) is not needed: golden
# files are committed; install it only to regenerate them (tests/golden/README.md).
# The GEMM library is oneDNN (libdnnl-dev), the build's default; ATTN_GEMM=openblas bash
# scripts/setup.sh installs OpenBLAS (libopenblas-dev) for -DATTN_GEMM=openblas instead.
# bash scripts/setup.sh --cross installs, instead, what scripts/cross_test.sh needs: qemu-user, the
# aarch64 and s390x cross compilers, and those architectures' OpenBLAS (dpkg multiarch).
set -euo pipefail
if [[ ${1:-} == --cross ]]; then
  packages=(qemu-user gcc-aarch64-linux-gnu gcc-s390x-linux-gnu libopenblas-dev:arm64 libopenblas-dev:s390x)
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || exit 0
  echo "setup: installing ${missing[*]}"
  for a in arm64 s390x; do
    dpkg --print-foreign-architectures | grep -qx "$a" || dpkg --add-architecture "$a"
  done
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  exit
fi
case ${ATTN_GEMM:-dnnl} in
  dnnl) gemm=libdnnl-dev ;;
  openblas) gemm=libopenblas-dev ;;
  *) echo "setup: ATTN_GEMM is \"$ATTN_GEMM\", expected dnnl or openblas" >&2; exit 2 ;;
esac
# zlib: libattn_data; cairo, Pango and the CJK font: libattn_plot (the core needs neither)
packages=(build-essential cmake pkg-config "$gemm" zlib1g-dev
          libcairo2-dev libpango1.0-dev fonts-wqy-zenhei time openmpi-bin libopenmpi-dev
          clang libclang-rt-14-dev clang-format valgrind python3-numpy) # clang + its runtime:
          # libFuzzer (fuzz/); clang-format: tests/format_check.sh; valgrind; numpy:
          # tools/safetensors_convert.py, read back in a test
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
