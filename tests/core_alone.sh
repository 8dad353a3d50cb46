#!/usr/bin/env bash
# The core library without the libraries beside it, on a machine without their development
# packages: in a private mount namespace (unshare -m, as root or in a user namespace) an overlay
# on /usr hides every file of zlib1g-dev, libcairo2-dev, libpango1.0-dev and libcjson-dev
# (dpkg -L: headers, .pc files, the unversioned .so and .a, CMake files); their run-time
# libraries stay, as on any Debian system (the compiler and CMake use zlib's). There
# -DATTN_DATA=OFF -DATTN_PLOT=OFF configures and builds libattn, which is installed into a
# temporary prefix; examples/pytorch_weights.c is built against it with pkg-config alone and run.
# Prints the build's pkg-config --static --libs attn and the example's ldd; fails when either
# names zlib, cairo, Pango or cJSON. Usage: tests/core_alone.sh BUILD_DIR (made, or reused).
# Exits 77 (skipped) without a mount namespace, overlayfs or dpkg.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: tests/core_alone.sh BUILD_DIR}
dev_packages=(zlib1g-dev libcairo2-dev libpango1.0-dev libcjson-dev)
if [[ "${ATTN_CORE_ALONE_INSIDE:-}" != 1 ]]; then
  command -v dpkg >/dev/null || { echo "core_alone: no dpkg: skipped"; exit 77; }
  flags=-m
  unshare -m true 2>/dev/null || flags=-rm
  unshare $flags true 2>/dev/null || { echo "core_alone: no mount namespace here: skipped"; exit 77; }
  exec env ATTN_CORE_ALONE_INSIDE=1 unshare $flags --propagation private bash "$0" "$@"
fi

# ---- inside the namespace: the overlay on /usr, a whiteout (0:0 device) per hidden file ----
layer=$(mktemp -d)
prefix=$(mktemp -d)
trap 'rm -rf "$layer" "$prefix"' EXIT
mkdir "$layer/upper" "$layer/work"
hidden=0
while read -r path; do
  [[ "$path" == /usr/* && ( -f "$path" || -L "$path" ) && ! -d "$path" ]] || continue
  mkdir -p "$layer/upper$(dirname "${path#/usr}")"
  mknod "$layer/upper${path#/usr}" c 0 0 2>/dev/null || { echo "core_alone: cannot make whiteouts here: skipped"; exit 77; }
  hidden=$((hidden + 1))
done < <(dpkg -L "${dev_packages[@]}" 2>/dev/null)
if ! mount -t overlay overlay -o "lowerdir=/usr,upperdir=$layer/upper,workdir=$layer/work" /usr; then
  echo "core_alone: no overlayfs here: skipped"; exit 77
fi
echo "core_alone: $hidden files of ${dev_packages[*]} hidden"
for module in zlib cairo pangocairo libcjson; do
  if pkg-config --exists "$module"; then echo "core_alone: pkg-config still finds $module"; exit 1; fi
done
for header in zlib.h cairo/cairo.h pango-1.0/pango/pango.h cjson/cJSON.h; do
  if echo "#include <$header>" | cc -x c -fsyntax-only - 2>/dev/null; then
    echo "core_alone: the compiler still finds <$header>"; exit 1
  fi
done
if echo 'int main(void) { return 0; }' | cc -x c - -o "$prefix/z" -lz 2>/dev/null; then
  echo "core_alone: the linker still finds -lz"; exit 1
fi

if ! log=$(cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF -DATTN_DATA=OFF -DATTN_PLOT=OFF \
                 -DATTN_BUILD_TESTS=OFF 2>&1 && cmake --build "$build" -j"$(nproc)" 2>&1 &&
             cmake --install "$build" --prefix "$prefix" 2>&1); then
  echo "$log" | tail -30; echo "core_alone: the core does not build"; exit 1
fi
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name attn.pc)")
libs=$(pkg-config --static --libs attn)
echo "pkg-config --static --libs attn: $libs"
# shellcheck disable=SC2046 # the flags are words
cc -std=c11 -Wall -Wextra -Werror examples/pytorch_weights.c -o "$prefix/pytorch_weights" \
   $(pkg-config --cflags --libs attn) -lm
export LD_LIBRARY_PATH
LD_LIBRARY_PATH=$(pkg-config --variable=libdir attn)
linked=$(ldd "$prefix/pytorch_weights" | sed 's/ (0x[0-9a-f]*)$//')
echo "ldd pytorch_weights:"
echo "$linked" | sed 's/^/  /'
"$prefix/pytorch_weights" tests/golden
if [[ "$libs" =~ (^| )-lz( |$)|zlib|cairo|pango|cjson ]] || [[ "$linked" =~ libz\.|cairo|pango|cjson ]]; then
  echo "core_alone: the core links zlib, cairo, Pango or cJSON"; exit 1
fi
echo "core_alone: ok"
