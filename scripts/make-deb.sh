#!/usr/bin/env bash
# make-deb.sh [BUILD_DIR]: makes fp8-workbench_<version>_<arch>.deb from a build of its own
# (default ./build-deb): Release, the CPU build on Debian's LibTorch, without the CUDA and
# HIP kernels (their runtimes come from outside Debian, so a package linking them would not
# start where they are missing), tests or benchmarks. Prints the package's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build-deb}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP8WB_CUDA=OFF -DFP8WB_HIP=OFF \
  -DFP8WB_TESTS=OFF -DFP8WB_BENCHMARKS=OFF >/dev/null
cmake --build "$BUILD_DIR" --parallel "$(nproc)" >/dev/null
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD_DIR/CMakeCache.txt")
deb="$BUILD_DIR/fp8-workbench_${version}_$(dpkg --print-architecture).deb"
rm -f "$BUILD_DIR"/fp8-workbench_*.deb
(cd "$BUILD_DIR" && cpack -G DEB >/dev/null)
[ -f "$deb" ] || { echo "make-deb: cpack did not write $deb" >&2; exit 1; }
echo "$deb"
