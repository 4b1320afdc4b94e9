#!/usr/bin/env bash
# Sets everything up (Debian 12), builds, and runs every test: unit, CLI, GUI (offscreen)
# and GPU tests (which skip without a GPU). The build compiles the kernels with hipcc too
# (kernels/hip); the hip.* tests check those objects and their host code without an AMD GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's heading says how long the run has taken so far (CI allows 90 minutes; the
# project keeps the whole run under 45 on its 2-core machine). At the end, and where a
# step fails, a table gives each step's own time (docs/performance.md, "CI time").
step_names=() step_starts=()
phase() {
  step_names+=("$*") step_starts+=("$SECONDS")
  echo "== $* ($((SECONDS / 60)) min $((SECONDS % 60)) s in)"
}
# Builds that run beside the tests, at the lowest priority (nice 19): they take the CPU
# time the tests leave idle (tests waiting on timers, on other processes, on apt), hardly
# any of theirs. Each in a session of its own, its output in a log shown if it fails;
# stopped if the run ends before it does.
side_pids=()
stop_side_builds() {
  local pid
  for pid in "${side_pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
}
side_build() {  # side_build LOG COMMAND...: starts it, its pid in side_pid
  local log=$1
  shift
  mkdir -p "$(dirname "$log")"
  setsid nice -n 19 "$@" >"$log" 2>&1 </dev/null &
  side_pid=$!
  side_pids+=("$side_pid")
}
wait_side_build() {  # wait_side_build PID LOG WHAT
  if ! wait "$1"; then
    echo "$3 failed:"
    tail -n 100 "$2"
    exit 1
  fi
}
summary() {
  local rc=$? i end
  stop_side_builds
  if [ ${#step_names[@]} -gt 0 ]; then
    echo "== time per step"
    for i in "${!step_names[@]}"; do
      end=${step_starts[$((i + 1))]:-$SECONDS}
      printf '%4d min %2d s  %s\n' $(((end - step_starts[i]) / 60)) $(((end - step_starts[i]) % 60)) \
        "${step_names[$i]}"
    done
    printf '%4d min %2d s  total%s\n' $((SECONDS / 60)) $((SECONDS % 60)) \
      "$([ "$rc" -eq 0 ] || echo ", failed in: ${step_names[-1]}")"
  fi
  exit "$rc"
}
trap summary EXIT
phase "packages (apt)"
./scripts/setup.sh packages
# Sources match .clang-format before anything is built.
phase "format check"
./scripts/check-format.sh
phase "Release build (GUI, HIP objects, tests, benchmarks)"
./scripts/setup.sh build
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
SAN_DIR="$BUILD_DIR-asan"
SUPP="$PWD/tests/sanitizers"

# The unit, CLI and readers' tests again, built with AddressSanitizer and
# UndefinedBehaviorSanitizer (the project's code only: LibTorch, Qt and OpenBLAS are
# Debian's, uninstrumented; what they report is suppressed in tests/sanitizers/, each entry
# with its reason). Without the GPU kernels and tests: the CUDA and HIP runtimes are not
# instrumented, and hipcc's and nvcc's time is spent once, in the build above. Without the
# GUI: its tests run in the Release build above, and a GUI build under ASan doubles this
# build's time. -g1: line tables, enough for the reports' stack traces, without the full
# debug information's compile and link time. A GoogleTest program runs in 4 processes
# (FP8WB_GTEST_MODE=PROGRAM), not one a case: a process that loads LibTorch takes ~3 s to
# start under ASan. Built beside the Release tests and the Debian package.
side_build "$SAN_DIR/side-build.log" bash -c "cmake -S . -B '$SAN_DIR' -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO='-O1 -g1' -DFP8WB_SANITIZE=address,undefined -DFP8WB_BENCHMARKS=OFF \
  -DFP8WB_CUDA=OFF -DFP8WB_HIP=OFF -DFP8WB_GUI=OFF -DFP8WB_GPU_TESTS=OFF -DFP8WB_GTEST_MODE=PROGRAM &&
  cmake --build '$SAN_DIR' --parallel $(nproc)"
asan_pid=$side_pid

# Every test, the ones labelled slow (over 30 s here) included: this is where they run.
phase "tests (Release; the ASan build beside them)"
ctest --test-dir "$BUILD_DIR" --output-on-failure --parallel "$(nproc)" --timeout 600

# The Debian package, from a CPU build of its own (scripts/make-deb.sh: no CUDA or HIP
# runtime, which Debian does not provide; ccache makes all of it but the links from the
# build above, whose flags it shares): built, checked with lintian, installed with
# apt-get, its libraries checked to come from Debian packages, run from /usr/bin (the CLI,
# a short training run, the GUI offscreen through its desktop entry) and removed again,
# also when a step fails.
phase "Debian package (the ASan build beside it)"
./scripts/test-deb.sh "$BUILD_DIR-deb"

phase "ASan + UBSan build (what is left of it)"
wait_side_build "$asan_pid" "$SAN_DIR/side-build.log" "the ASan + UBSan build"

# ThreadSanitizer on the run store's writer thread, its readers and the run follower,
# built without LibTorch (tests/tsan says why: its thread pool is not instrumented), and
# the fuzzers (tests/fuzz: clang, libFuzzer, ASan, UBSan): both built beside the ASan tests.
side_build "$BUILD_DIR-tsan/side-build.log" bash -c "cmake -S tests/tsan -B '$BUILD_DIR-tsan' -G Ninja &&
  cmake --build '$BUILD_DIR-tsan' --parallel $(nproc)"
tsan_pid=$side_pid
side_build "$BUILD_DIR-fuzz/side-build.log" bash -c "CXX=clang++ cmake -S tests/fuzz -B '$BUILD_DIR-fuzz' -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build '$BUILD_DIR-fuzz' --parallel $(nproc)"
fuzz_pid=$side_pid

# A test that cannot run under ASan carries the label no_asan, with the reason beside it;
# the slow ones (label slow) ran once, in the Release pass.
phase "ASan + UBSan tests (the TSan and fuzzer builds beside them)"
ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1" \
LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0" \
UBSAN_OPTIONS="suppressions=$SUPP/ubsan.supp:print_stacktrace=1:halt_on_error=1" \
  ctest --test-dir "$SAN_DIR" --output-on-failure --parallel "$(nproc)" --timeout 900 -LE 'no_asan|slow'

phase "TSan (run store, follower)"
wait_side_build "$tsan_pid" "$BUILD_DIR-tsan/side-build.log" "the TSan build"
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" \
  ctest --test-dir "$BUILD_DIR-tsan" --output-on-failure --timeout 300

# The fuzzers (the readers, the run config), built with clang and sanitizers, each for a
# bounded time from its seed corpus (new inputs go to a scratch folder, not the
# repository), as many at once as there are cores (each fuzzer is one thread). With a
# memory limit: an input that makes the readers allocate far beyond its size (a bomb) is a
# finding, like a crash.
FUZZ_SECONDS="${FUZZ_SECONDS:-60}"
phase "fuzzers (${FUZZ_SECONDS} s each, $(nproc) at once)"
wait_side_build "$fuzz_pid" "$BUILD_DIR-fuzz/side-build.log" "the fuzzers' build"
fuzz() {
  local name=$1 scratch rc=0
  scratch=$(mktemp -d)
  "$BUILD_DIR-fuzz/${name}_fuzz" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 \
    -rss_limit_mb=2048 -malloc_limit_mb=128 \
    "$scratch" "tests/fuzz/corpus/$name" >"$BUILD_DIR-fuzz/$name.log" 2>&1 || rc=$?
  rm -rf "$scratch"
  return "$rc"
}
names=()
for corpus in tests/fuzz/corpus/*/; do names+=("$(basename "$corpus")"); done
fuzz_failed=()
for ((first = 0; first < ${#names[@]}; first += $(nproc))); do
  batch=("${names[@]:first:$(nproc)}") pids=()
  for name in "${batch[@]}"; do
    fuzz "$name" &
    pids+=($!)
  done
  for i in "${!batch[@]}"; do
    name=${batch[$i]}
    if wait "${pids[$i]}"; then
      echo "-- ${name}_fuzz"
      tail -3 "$BUILD_DIR-fuzz/$name.log"
    else
      echo "-- ${name}_fuzz failed:"
      cat "$BUILD_DIR-fuzz/$name.log"
      fuzz_failed+=("$name")
    fi
  done
done
[ ${#fuzz_failed[@]} -eq 0 ] || { echo "fuzzers that failed: ${fuzz_failed[*]}"; exit 1; }
