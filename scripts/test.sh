#!/usr/bin/env bash
# Sets everything up (Debian 12), builds, and runs every test: unit, CLI, GUI (offscreen)
# and GPU tests (which skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
BUILD_DIR="${BUILD_DIR:-build}"
export QT_QPA_PLATFORM=offscreen
ctest --test-dir "$BUILD_DIR" --output-on-failure --parallel "$(nproc)" --timeout 600

# The fuzzers (the readers, the run config), built with clang and sanitizers, each for a bounded time from
# its seed corpus (new inputs go to a scratch folder, not the repository). With a memory
# limit: an input that makes the readers allocate far beyond its size (a bomb) is a
# finding, like a crash.
FUZZ_SECONDS="${FUZZ_SECONDS:-60}"
echo "== fuzzers (${FUZZ_SECONDS} s each)"
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
