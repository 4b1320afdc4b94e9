#!/usr/bin/env bash
# Sets everything up (Debian 12), builds, and runs every test: unit, CLI, GUI (offscreen)
# and GPU tests (which skip without a GPU). The build compiles the kernels with hipcc too
# (kernels/hip); the hip.* tests check those objects and their host code without an AMD GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's heading says how long the run has taken so far (CI allows 90 minutes).
phase() { echo "== $* ($((SECONDS / 60)) min $((SECONDS % 60)) s in)"; }
./scripts/setup.sh
# Sources match .clang-format before anything runs.
./scripts/check-format.sh
# The sanitizer and fuzzer builds share ccache across clones too (setup.sh).
export CCACHE_DIR="${CCACHE_DIR:-${HOME:-/tmp}/.cache/ccache}" CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
BUILD_DIR="${BUILD_DIR:-build}"
export QT_QPA_PLATFORM=offscreen
# ctest runs a test on every core at once, and each test's LibTorch takes every core too:
# OpenMP's threads sleep while they wait instead of spinning, or the spinning threads of
# one test starve the next one's (two 40-step trainings side by side: 62 s each spinning,
# 7.4 s each sleeping).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
phase "tests"
ctest --test-dir "$BUILD_DIR" --output-on-failure --parallel "$(nproc)" --timeout 600

# The Debian package, from a CPU build of its own (scripts/make-deb.sh: no CUDA or HIP
# runtime, which Debian does not provide; ccache makes most of it from the build above):
# built, checked with lintian, installed with apt-get, its libraries checked to come from
# Debian packages, run from /usr/bin (the CLI, a short training run, the GUI offscreen
# through its desktop entry) and removed again, also when a step fails.
phase "Debian package"
./scripts/test-deb.sh "$BUILD_DIR-deb"

# The unit, CLI and GUI tests again, built with AddressSanitizer and UndefinedBehaviorSanitizer
# (the project's code only: LibTorch, Qt and OpenBLAS are Debian's, uninstrumented; what
# they report is suppressed in tests/sanitizers/, each entry with its reason). A test that
# cannot run under ASan would carry the label no_asan, with the reason beside it.
phase "ASan + UBSan"
SAN_DIR="$BUILD_DIR-asan"
# Without the GPU kernels: the CUDA and HIP runtimes are not instrumented, and hipcc's and
# nvcc's time is spent once, in the build above. -g1: line tables, enough for the reports'
# stack traces, without the full debug information's compile and link time.
cmake -S . -B "$SAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DFP8WB_SANITIZE=address,undefined -DFP8WB_BENCHMARKS=OFF -DFP8WB_CUDA=OFF -DFP8WB_HIP=OFF >/dev/null
cmake --build "$SAN_DIR" --parallel "$(nproc)"
SUPP="$PWD/tests/sanitizers"
ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1" \
LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0" \
UBSAN_OPTIONS="suppressions=$SUPP/ubsan.supp:print_stacktrace=1:halt_on_error=1" \
  ctest --test-dir "$SAN_DIR" --output-on-failure --parallel "$(nproc)" --timeout 900 -LE no_asan

# ThreadSanitizer on the run store's writer thread, its readers and the run follower,
# built without LibTorch (tests/tsan says why: its thread pool is not instrumented).
phase "TSan (run store, follower)"
cmake -S tests/tsan -B "$BUILD_DIR-tsan" -G Ninja >/dev/null
cmake --build "$BUILD_DIR-tsan" --parallel "$(nproc)"
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" \
  ctest --test-dir "$BUILD_DIR-tsan" --output-on-failure --timeout 300

# The fuzzers (the readers, the run config), built with clang and sanitizers, each for a bounded time from
# its seed corpus (new inputs go to a scratch folder, not the repository). With a memory
# limit: an input that makes the readers allocate far beyond its size (a bomb) is a
# finding, like a crash.
FUZZ_SECONDS="${FUZZ_SECONDS:-60}"
phase "fuzzers (${FUZZ_SECONDS} s each)"
CXX=clang++ cmake -S tests/fuzz -B "$BUILD_DIR-fuzz" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD_DIR-fuzz" --parallel "$(nproc)"
for corpus in tests/fuzz/corpus/*/; do
  name=$(basename "$corpus")
  scratch=$(mktemp -d)
  "$BUILD_DIR-fuzz/${name}_fuzz" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 \
    -rss_limit_mb=2048 -malloc_limit_mb=128 \
    "$scratch" "$corpus" 2>&1 | tail -3
  rm -rf "$scratch"
done
phase "done"
