#!/usr/bin/env bash
# Installs the dependencies, builds and runs every test:
#   1. release build (build/), the whole suite at every level of the kernels this CPU has
#      (ATTN_CPU_ISA=baseline, avx2, avx512, avx512_bf16: `attn --version` lists them), and on an
#      AVX-512 CPU once more with oneDNN held to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2)
#   2. AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/), the whole suite
#   3. OpenMP off (build-noomp/), the whole suite
#   3b. -march=native (build-native/: ATTN_NATIVE, one level of kernels compiled for this CPU), the
#      whole suite
#   3c. ThreadSanitizer (build-tsan/, OpenMP off): tests/test_threads.c, two models trained by
#       two threads at once, with no report
#   4. install into a temporary prefix: examples/ built against it with pkg-config and with
#      find_package(attn), from C and C++ (examples/cxx_consumer.cpp), train_tiny linked
#      statically against libattn.a, the program built from cli/ against it alone, and the
#      installed attn run from / (classify train --max-steps 2 on the data installed in share/attn)
#   4b. the core alone (build-core/, tests/core_alone.sh): with the development files of zlib,
#      cairo, Pango and cJSON hidden, -DATTN_DATA=OFF -DATTN_PLOT=OFF builds libattn, and
#      examples/pytorch_weights.c runs against it; its ldd and pkg-config name none of them
#   5. data-parallel training with 2 MPI ranks against build/ (tests/mpi/test_mpi.sh, one count
#      per check)
#   5b. other architectures under qemu-user (scripts/cross_test.sh, after scripts/setup.sh --cross):
#      the core's suite cross-built for aarch64 and run at each kernel level (neon_bf16, sve at two
#      vector lengths, neon, baseline), and for s390x (big-endian) the tests that read or write bytes,
#      one thread; skipped where the cross packages cannot be installed
#   6. robustness: the bad-input matrix against build-asan/attn (tests/robustness.sh, one count per
#      row), SIGKILL during training + resume (tests/kill_resume.sh), every subcommand under
#      valgrind (tests/valgrind.sh), and 30 s of each libFuzzer target (fuzz/run.sh)
# Ends with one line "N passed, N failed" over all of them; exits non-zero on any failure. A test
# that needs something this machine lacks (python3-torch, objdump) says "skipped" and counts as
# neither.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
jobs=$(nproc)
passed=0
failed=0

build_suite() { # name, cmake options...: configures and builds build<name>; false on failure
  local name=$1; shift
  local build
  if ! build=$(cmake -S . -B "build$name" "$@" 2>&1 && cmake --build "build$name" -j"$jobs" 2>&1); then
    echo "$build" | tail -30; echo "suite $name: build failed"; failed=$((failed + 1)); return 1
  fi
  echo "$build" | grep -E "warning:" || true
}
run_ctest() { # label, build folder, environment assignments...: the suite once, its counts added
  local label=$1 dir=$2; shift 2
  echo "== suite $label"
  local log
  log=$(cd "$dir" && env "$@" ctest --output-on-failure -j2 2>&1)
  echo "$log" | grep -E "tests passed|Failed|\*\*\*|FAIL|Skipped" || true
  local total bad skipped
  total=$(echo "$log" | sed -nE 's/.*tests failed out of ([0-9]+).*/\1/p')
  bad=$(echo "$log" | sed -nE 's/.* ([0-9]+) tests failed out of.*/\1/p')
  skipped=$(echo "$log" | grep -cE "\*\*\*Skipped")
  if [[ -z "$total" ]]; then echo "suite $label: ctest did not run"; failed=$((failed + 1)); return; fi
  passed=$((passed + total - bad - skipped)); failed=$((failed + bad))
}
suite() { # name, cmake options...: build, then the suite at the best level
  local name=$1; shift
  build_suite "$name" "$@" && run_ctest "${name:-release}" "build$name"
}

# The release build at every level this CPU has; oneDNN's own choice held to AVX2 once where it
# would pick AVX-512 (its sums then run in another order: the goldens' bounds must hold either way)
# ATTN_NATIVE=OFF everywhere but the native suite: a build folder keeps a cached ON from before
if build_suite "" -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF; then
  levels=$(build/attn --version | sed -nE 's/^kernels: [a-z0-9_]+ \(of (.*) here;.*/\1/p')
  [[ -n "$levels" ]] || { echo "attn --version names no kernel levels"; failed=$((failed + 1)); }
  best=${levels##* }
  for level in $levels; do # the best level with ATTN_CPU_ISA unset: the run as users run it (the
                           # tests that run every documented command run there only)
    if [[ $level == "$best" ]]; then run_ctest "release (kernels at $level)" build
    else run_ctest "release, ATTN_CPU_ISA=$level" build ATTN_CPU_ISA="$level"; fi
  done
  if [[ " $levels " == *" avx512 "* ]]; then
    run_ctest "release, ONEDNN_MAX_CPU_ISA=AVX2" build ONEDNN_MAX_CPU_ISA=AVX2
  fi
  # the golden tests' worst margins (the fraction of a bound used), so that one near 1 shows
  # before it fails somewhere
  (cd build && ctest -V -R 'golden|mlp_parity|test_tour$|cli_nw|test_optim|attention_bf16|attention_features' 2>&1) |
    grep -E "worst margin|used at most" | sed -E 's/^[0-9]+: //'
fi
suite "-asan" -DCMAKE_BUILD_TYPE=Debug -DATTN_SANITIZE=ON -DATTN_NATIVE=OFF
suite "-noomp" -DCMAKE_BUILD_TYPE=Release -DATTN_OPENMP=OFF -DATTN_NATIVE=OFF
suite "-native" -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=ON

echo "== ThreadSanitizer: two threads train two models at once (build-tsan/, OpenMP off)"
if cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Release -DATTN_TSAN=ON -DATTN_OPENMP=OFF -DATTN_NATIVE=OFF >/dev/null &&
   cmake --build build-tsan -j"$jobs" --target test_threads >/dev/null &&
   TSAN_OPTIONS="halt_on_error=1 exitcode=66" build-tsan/test_threads; then
  passed=$((passed + 1))
else
  echo "test_threads under ThreadSanitizer: FAILED"; failed=$((failed + 1))
fi

echo "== install into a temporary prefix: pkg-config and find_package consumers, the program"
echo "   built on the installed library alone, and the installed attn run from /"
prefix=$(mktemp -d)
count() { # label, command...: one count
  local label=$1; shift
  if "$@"; then passed=$((passed + 1)); else echo "$label: FAILED"; failed=$((failed + 1)); fi
}
pkg_config_consumer() { # the examples with cc and pkg-config, each run
  local pcdir version
  pcdir=$(dirname "$(find "$prefix" -name attn.pc | head -1)") || return 1
  version=$(sed -nE 's/^project\(attn VERSION ([0-9.]+).*/\1/p' CMakeLists.txt)
  [[ "$(PKG_CONFIG_PATH="$pcdir" pkg-config --modversion attn)" == "$version" ]] || return 1
  local example libdir
  libdir=$(PKG_CONFIG_PATH="$pcdir" pkg-config --variable=libdir attn)
  for example in train_tiny pytorch_weights; do
    cc -std=c11 -Wall -Wextra -Werror "examples/$example.c" -o "$prefix/$example" \
       $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs attn) -lm || return 1
  done
  c++ -std=c++11 -Wall -Wextra -pedantic -Werror examples/cxx_consumer.cpp -o "$prefix/cxx_consumer" \
     $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs attn) || return 1
  LD_LIBRARY_PATH="$libdir" "$prefix/train_tiny" && LD_LIBRARY_PATH="$libdir" "$prefix/pytorch_weights" tests/golden &&
  LD_LIBRARY_PATH="$libdir" "$prefix/cxx_consumer" >/dev/null
}
static_consumer() { # libattn.a in place of -lattn, its dependencies from pkg-config --static
  local pcdir libs
  pcdir=$(dirname "$(find "$prefix" -name attn.pc | head -1)") || return 1
  libs=$(PKG_CONFIG_PATH="$pcdir" pkg-config --static --libs attn) || return 1
  # shellcheck disable=SC2086 # the flags are words
  cc -std=c11 -Wall -Wextra -Werror examples/train_tiny.c -o "$prefix/train_tiny_static" \
     $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags attn) ${libs/-lattn/-l:libattn.a} || return 1
  ! ldd "$prefix/train_tiny_static" | grep -q libattn && "$prefix/train_tiny_static" >/dev/null
}
cmake_consumer() { # examples/CMakeLists.txt: find_package(attn), attn::attn, from C and C++
  cmake -S examples -B "$prefix/build-examples" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null &&
  cmake --build "$prefix/build-examples" -j"$jobs" >/dev/null &&
  "$prefix/build-examples/train_tiny" && "$prefix/build-examples/pytorch_weights" tests/golden &&
  "$prefix/build-examples/cxx_consumer" >/dev/null
}
program_on_installed_library() { # cli/CMakeLists.txt alone: the program needs only attn.h
  cmake -S cli -B "$prefix/build-cli" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null &&
  cmake --build "$prefix/build-cli" -j"$jobs" >/dev/null &&
  [[ "$("$prefix/build-cli/attn" --version | head -1)" == "attn $(sed -nE 's/^project\(attn VERSION ([0-9.]+).*/\1/p' CMakeLists.txt)" ]]
}
installed_attn_from_root() { # finds share/attn/aclImdb_mini beside itself
  (cd / && "$prefix/bin/attn" classify train --max-steps 2 --checkpoint "$prefix/classifier.safetensors")
}
if cmake --install build --prefix "$prefix" >/dev/null; then
  count "pkg-config consumer (examples/, cc and c++)" pkg_config_consumer
  count "static consumer (libattn.a, pkg-config --static)" static_consumer
  count "find_package consumer (examples/CMakeLists.txt)" cmake_consumer
  count "the program built against the installed library (cli/CMakeLists.txt)" program_on_installed_library
  count "cd / && attn classify train --max-steps 2 (installed)" installed_attn_from_root
else
  echo "cmake --install: FAILED"; failed=$((failed + 1))
fi
rm -rf "$prefix"

echo "== the core alone, without the development files of zlib, cairo, Pango, cJSON (tests/core_alone.sh)"
core_log=$(bash tests/core_alone.sh build-core 2>&1)
case $? in
  0) passed=$((passed + 1)); echo "$core_log" | grep -E "^core_alone: [0-9]+ files|^pkg-config" ;;
  77) echo "$core_log" | tail -1 ;;
  *) echo "$core_log" | tail -30; echo "core alone: FAILED"; failed=$((failed + 1)) ;;
esac

echo "== MPI: 2 ranks (tests/mpi/test_mpi.sh)"
mpi_log=$(timeout 600 bash tests/mpi/test_mpi.sh build 2>&1)
echo "$mpi_log" | grep -vE "^mpi: "
mpi_ok=$(echo "$mpi_log" | sed -nE 's/^mpi: ([0-9]+) passed, ([0-9]+) failed$/\1/p')
mpi_bad=$(echo "$mpi_log" | sed -nE 's/^mpi: ([0-9]+) passed, ([0-9]+) failed$/\2/p')
if [[ -z "$mpi_ok" ]]; then
  echo "MPI tests did not finish"; failed=$((failed + 1))
else
  passed=$((passed + mpi_ok)); failed=$((failed + mpi_bad))
fi

counted() { # label, time limit, command...: adds the counts of its last line "<label>: N passed, N failed"
  local label=$1 limit=$2; shift 2
  local log ok bad
  log=$(timeout "$limit" "$@" 2>&1)
  echo "$log" | grep -vE "^$label: [0-9]+ passed"
  ok=$(echo "$log" | sed -nE "s/^$label: ([0-9]+) passed, ([0-9]+) failed$/\1/p")
  bad=$(echo "$log" | sed -nE "s/^$label: ([0-9]+) passed, ([0-9]+) failed$/\2/p")
  if [[ -z "$ok" ]]; then echo "$label: did not finish"; failed=$((failed + 1)); return; fi
  echo "$label: $ok passed, $bad failed"
  passed=$((passed + ok)); failed=$((failed + bad))
}
# Other architectures under qemu-user (scripts/cross_test.sh, one thread each): in the background,
# beside the robustness checks (a core each). aarch64 at each kernel level; s390x, the tests that
# read or write bytes (files, goldens) and the attention's, not the whole suite (10 min emulated:
# bash scripts/cross_test.sh s390x-linux-gnu runs it). Counted at the end.
s390x_tests="safetensors|checkpoint|load_once|params_load|test_lm_|golden|state_dict|example_|st_bytes|test_attention$|test_masks|test_cpu_isa"
cross_log=$(mktemp)
(
  if bash scripts/setup.sh --cross; then
    CROSS_JOBS=1 timeout 1500 bash scripts/cross_test.sh aarch64-linux-gnu
    CROSS_JOBS=1 timeout 600 bash scripts/cross_test.sh s390x-linux-gnu -R "$s390x_tests"
  else
    echo "cross_test: the cross compilers or qemu-user could not be installed: skipped"
  fi
) >"$cross_log" 2>&1 &
cross_pid=$!

echo "== robustness: bad-input matrix (against build-asan/), SIGKILL + resume, valgrind, fuzzing"
counted robustness 600 bash tests/robustness.sh build-asan/attn # one count per row of the table
counted kill_resume 300 bash tests/kill_resume.sh build/attn    # one per kill, plus 4 comparisons
counted valgrind 600 bash tests/valgrind.sh                      # one per subcommand
counted fuzz 600 bash fuzz/run.sh 30                            # one per target, 30 s each

echo "== other architectures under qemu-user (scripts/cross_test.sh): aarch64 at each kernel level, s390x"
wait "$cross_pid"
grep -vE "^cross_test: [0-9]+ passed, [0-9]+ failed$" "$cross_log"
if ! grep -q "skipped$" "$cross_log"; then
  runs=$(grep -cE "^cross_test: [0-9]+ passed, [0-9]+ failed$" "$cross_log")
  ((runs == 2)) || { echo "cross_test: $((2 - runs)) of the 2 architectures did not finish"; failed=$((failed + 2 - runs)); }
  while read -r ok bad; do
    echo "cross_test: $ok passed, $bad failed"; passed=$((passed + ok)); failed=$((failed + bad))
  done < <(sed -nE 's/^cross_test: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$cross_log")
fi
rm -f "$cross_log"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
